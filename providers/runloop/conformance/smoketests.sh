#!/usr/bin/env bash
# Runs Runloop's own smoke tests (tests/smoketests of the public
# runloopai/api-client-ts repository) -- the devbox, execution and file
# groups -- against `sandbox serve --api runloop`, over HTTP/1.1 and over
# HTTP/2, with the @runloop/api-client of this folder's lock file. Runloop's
# code is copied into a temporary directory and never kept; CI runs
# sdk-flow.mjs instead (this needs GitHub and npm).
#   providers/runloop/conformance/smoketests.sh
#   RUNLOOP_TS_REPO=/path/to/api-client-ts .../smoketests.sh   (a checkout or a bare repository)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
files="utils.ts devboxes.test.ts executions.test.ts object-oriented/devbox.test.ts object-oriented/execution.test.ts"

tmp=$(mktemp -d)
stop() {
	if [ -n "${pid:-}" ]; then kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap stop EXIT

repo=${RUNLOOP_TS_REPO:-}
if [ -z "$repo" ]; then
	repo=$tmp/api-client-ts
	git clone --quiet --depth 1 https://github.com/runloopai/api-client-ts "$repo"
fi
for f in $files; do
	mkdir -p "$tmp/run/tests/smoketests/$(dirname "$f")"
	if [ -d "$repo/tests" ]; then
		cp "$repo/tests/smoketests/$f" "$tmp/run/tests/smoketests/$f"
	else
		git --git-dir "$repo" show "HEAD:tests/smoketests/$f" >"$tmp/run/tests/smoketests/$f"
	fi
done
version=$(node -p 'require(process.argv[1]).packages["node_modules/@runloop/api-client"].version' "$here/package-lock.json")
# The suite uses test.concurrent under beforeAll, which needs jest 30.
printf '{ "private": true, "dependencies": { "@runloop/api-client": "%s", "uuidv7": "1.2.1", "jest": "30.5.2", "@swc/jest": "0.2.39", "@swc/core": "1.16.22" } }\n' "$version" >"$tmp/run/package.json"
printf '%s\n' "module.exports = { testEnvironment: 'node', testTimeout: 300000, transform: { '^.+\\\\.(t|j)sx?\$': ['@swc/jest'] } };" >"$tmp/run/jest.config.js"
(cd "$tmp/run" && npm install --no-audit --no-fund --loglevel=error >/dev/null)

(cd "$root" && go build -o "$tmp/sandbox" ./cmd/sandbox)
export XDG_STATE_HOME=$tmp/state XDG_CONFIG_HOME=$tmp/config
"$tmp/sandbox" serve --api runloop --addr 127.0.0.1:0 >"$tmp/env" 2>"$tmp/serve.log" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/env" ] && break; sleep 0.1; done
# shellcheck disable=SC1091
. "$tmp/env"
export RUNLOOP_BASE_URL RUNLOOP_API_KEY RUN_SMOKETESTS=1

status=0
for http2 in 0 1; do
	echo "== SMOKE_HTTP2=$http2"
	(cd "$tmp/run" && SMOKE_HTTP2=$http2 npx jest --verbose tests/smoketests 2>&1) | grep -E '✓|✕|○|^Tests:' || status=1
done
exit $status
