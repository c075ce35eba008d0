#!/usr/bin/env bash
# Compares this project's daytona client with Daytona's official
# TypeScript SDK against one `sandbox serve --api daytona` (local
# sandboxes) on this machine: the median time from starting `echo x` to
# its first streamed output, and the throughput of a 50 MiB upload. Prints
# both and their ratios.
#   providers/daytona/conformance/bench.sh        (run from anywhere in the repo)
#   BENCH_RUNS=50 BENCH_UPLOADS=10 .../bench.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
runs=${BENCH_RUNS:-20}
uploads=${BENCH_UPLOADS:-5}
export BENCH_RUNS=$runs BENCH_UPLOADS=$uploads

work=$(mktemp -d)
cleanup() {
	[ -n "${serve_pid:-}" ] && kill -INT "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/sandbox" ./cmd/sandbox)
[ -d "$here/node_modules" ] || (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)

export XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config"
"$work/sandbox" serve --api daytona --addr 127.0.0.1:0 >"$work/env" 2>"$work/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [ -s "$work/env" ] && break; sleep 0.1; done
# shellcheck disable=SC1091
. "$work/env"
export DAYTONA_API_KEY DAYTONA_API_URL

sdk=$(cd "$here" && node bench.mjs)
# As many uploads as the SDK makes, as many commands as it runs.
gobench=$(cd "$root" && export DAYTONA_BENCH_URL="$DAYTONA_API_URL" &&
	go test -run '^$' -bench 'BenchmarkFirstOutput' -benchtime "${runs}x" ./providers/daytona/ 2>&1 &&
	go test -run '^$' -bench 'BenchmarkUpload' -benchtime "${uploads}x" ./providers/daytona/ 2>&1)
go_first=$(awk '/^BenchmarkFirstOutput/ { for (i = 1; i <= NF; i++) if ($(i+1) == "first-output-ms") print $i }' <<<"$gobench")
go_up=$(awk '/^BenchmarkUpload/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i }' <<<"$gobench")
sdk_first=$(node -e 'console.log(JSON.parse(process.argv[1]).first_output_ms.toFixed(2))' "$sdk")
sdk_up=$(node -e 'console.log(JSON.parse(process.argv[1]).upload_mb_s.toFixed(1))' "$sdk")
if [ -z "$go_first" ] || [ -z "$go_up" ]; then
	echo "go benchmark output not understood:" >&2; echo "$gobench" >&2; exit 1
fi

printf '%-38s %12s %14s %8s\n' "against sandbox serve --api daytona" "our client" "official SDK" "ratio"
printf '%-38s %12s %14s %8s\n' "first output of echo x (median, ms)" "$go_first" "$sdk_first" \
	"$(awk -v a="$go_first" -v b="$sdk_first" 'BEGIN { printf "%.2fx", a / b }')"
printf '%-38s %12s %14s %8s\n' "upload 50 MiB (MB/s)" "$go_up" "$sdk_up" \
	"$(awk -v a="$go_up" -v b="$sdk_up" 'BEGIN { printf "%.2fx", a / b }')"
echo "(ratio = ours / SDK: lower is better for latency, higher is better for throughput; $runs exec runs, $uploads SDK uploads)"
