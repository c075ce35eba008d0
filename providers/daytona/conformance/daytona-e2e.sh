#!/usr/bin/env bash
# Runs Daytona's own end-to-end suite (sdk-typescript/src/__tests__/e2e.test.ts
# of the public daytona/clients repository) against `sandbox serve --api
# daytona`, with the published @daytonaio/sdk of this folder's lock file.
# Daytona's code is fetched into a temporary directory and never kept; CI
# does not run this (it needs GitHub), it runs sdk-flow.mjs instead.
#   providers/daytona/conformance/daytona-e2e.sh              (the groups an emulator serves)
#   DAYTONA_E2E_GROUPS=. providers/daytona/conformance/daytona-e2e.sh   (every group)
#   DAYTONA_CLIENTS_DIR=/path/to/clients .../daytona-e2e.sh   (a checkout, or a bare repository, already here)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
groups=${DAYTONA_E2E_GROUPS:-'Sandbox Lifecycle|File System Operations|Process Execution|Session Management|Daytona Client Operations|Sandbox Stop/Start Cycle|Additional Process and Error Handling|Additional Sandbox Operations|Signed URL Operations|System Metrics'}

work=$(mktemp -d)
cleanup() {
	[ -n "${serve_pid:-}" ] && kill -INT "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

suite=sdk-typescript/src/__tests__/e2e.test.ts
src=${DAYTONA_CLIENTS_DIR:-}
if [ -z "$src" ]; then
	git clone --quiet --depth 1 https://github.com/daytona/clients "$work/clients"
	src="$work/clients"
fi
mkdir -p "$work/e2e"
if [ -f "$src/$suite" ]; then
	cat "$src/$suite"
else # a bare repository
	git --git-dir "$src" show "HEAD:$suite"
fi |
	# The suite imports the SDK's sources; point it at the published package.
	sed -E "s#from '\.\./(Daytona|errors/DaytonaError|Image|Sandbox|PtyHandle)'#from '@daytonaio/sdk'#" >"$work/e2e/e2e.test.ts"
sdk_version=$(node -p 'require(process.argv[1]).packages["node_modules/@daytonaio/sdk"].version' "$here/package-lock.json")
cat >"$work/e2e/package.json" <<EOF
{ "private": true, "dependencies": { "@daytonaio/sdk": "$sdk_version", "jest": "29.7.0", "ts-jest": "29.2.5",
  "typescript": "5.6.3", "@types/jest": "29.5.14", "@types/node": "20.17.6" } }
EOF
cat >"$work/e2e/jest.config.js" <<'EOF'
module.exports = { testEnvironment: 'node', testMatch: ['**/e2e.test.ts'],
  transform: { '^.+\\.tsx?$': ['ts-jest', { diagnostics: false, tsconfig: { esModuleInterop: true, target: 'es2022', module: 'commonjs' } }] } }
EOF
(cd "$work/e2e" && npm install --no-audit --no-fund --loglevel=error >/dev/null)

(cd "$root" && go build -o "$work/sandbox" ./cmd/sandbox)
export XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config"
"$work/sandbox" serve --api daytona --addr 127.0.0.1:0 >"$work/env" 2>"$work/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [ -s "$work/env" ] && break; sleep 0.1; done
# shellcheck disable=SC1091
. "$work/env"
export DAYTONA_API_KEY DAYTONA_API_URL

cd "$work/e2e" && npx jest --runInBand --testTimeout=120000 -t "$groups"
