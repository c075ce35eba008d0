#!/usr/bin/env bash
# Times `sandbox exec -- true` on a reused local sandbox (a cold CLI each
# time) against bwrap running the same command, in one paired run, and
# prints the medians and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bwrap >/dev/null || { echo "bench: install bubblewrap (apt-get install bubblewrap)" >&2; exit 1; }
work=$(mktemp -d)
trap 'XDG_STATE_HOME=$work/state "$work/sandbox" delete --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/sandbox" ./cmd/sandbox
go build -o "$work/pair" ./bench/pair
export XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config
id=$("$work/sandbox" create 2>/dev/null)
"$work/pair" -n "${RUNS:-40}" \
	"$work/sandbox --sandbox-id $id exec -- true" \
	"bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true"
