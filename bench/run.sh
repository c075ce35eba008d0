#!/usr/bin/env bash
# The benchmarks of DESIGN §8 and of the machine model, side by side with
# the reference tools in one run (each pair alternates A B A B … so machine
# noise hits both alike):
#
#   exec       `sandbox exec -- true` on a running sandbox, a cold CLI each
#              time, against bwrap running `true` (target ≤ 1.0×: no
#              namespace is made per call any more); once back to back and
#              once with a GAP (50ms) before each run, as the machine
#              prepares its next runner after each operation
#   inproc     the same through the provider in one process (go test
#              -bench: exec true, a small read, start + exec; targets
#              ≤ 2 ms for exec and read)
#   start      the first exec of a stopped sandbox (start + exec) against
#              one bwrap exec (target ≤ 3×), STANDBY_GAP before each run so
#              that the standby machine the last start left is ready (see
#              README), and once without standby machines
#   create     create + exec + delete (`sandbox exec -- true` without an id)
#              against one bwrap exec (target ≤ 3×), as start; once more with
#              the state directory on tmpfs, to show what the disk's metadata
#              operations (mkdir, rename, rmdir) cost
#   cpu        the CPU time the whole host spends per exec, start + exec and
#              create + exec + delete, and per bwrap exec (/proc/stat, steal
#              left out): steadier than wall time on a shared host, for
#              comparing two builds; the host must be otherwise idle
#   srt        the running-sandbox exec against srt (@anthropic-ai/sandbox-runtime)
#   stream     1 GiB through exec's stdout against `cat`, a 1 GiB upload and
#              download against `cp` (target ≥ 0.5× the throughput), with
#              the CLI's peak RSS (target ≤ 64 MiB)
#   concurrent 64 concurrent execs into one sandbox, then across 16
#              sandboxes: all succeed, p50/p99
#   idle       what a running sandbox with nothing in it holds on the host:
#              the RSS and PSS of its init and runners, at once and once idle
#              (target ≤ 10 MiB)
#
# Usage: bench/run.sh [SECTION...]   (default: all of them)
# Knobs: PROGRAM (sandbox, or sandbox-cloud to time the program with the cloud providers
# built in, its local inits still from sandbox beside it), RUNS (latency pairs, 40),
# EXEC_RUNS (pairs of the two exec rows, 100: a run is ~5 ms, and their medians
# move by a few percent from one run of 40 to the next), BIG_RUNS (throughput pairs after one untimed round, 3),
# CPU_RUNS (runs per cpu measure, 40; the kernel counts in clock ticks),
# STANDBY_GAP (250ms: a standby machine is ready ~150 ms after the start that asked for it),
# INPROC_RUNS (iterations of the in-process benchmarks, 300: a few dozen
# leave the pool's start-up in the mean), SIZE_MB (1024), ROUNDS (concurrent rounds, 3), GAP (50ms), IDLE (seconds
# before the idle measure, 40: runners unused for 30 s are dropped, then the init unmaps its code).
# It installs what it needs (apt: bubblewrap, time, socat, ripgrep; npm ci
# in bench/ for srt), builds the CLI the way the release does (static,
# CGO_ENABLED=0), keeps its sandboxes in a private state directory and
# deletes them on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(exec inproc start create cpu srt stream concurrent idle)
want() { local s; for s in "${sections[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

RUNS=${RUNS:-40}
EXEC_RUNS=${EXEC_RUNS:-100}
BIG_RUNS=${BIG_RUNS:-3}
SIZE_MB=${SIZE_MB:-1024}
ROUNDS=${ROUNDS:-3}
GAP=${GAP:-50ms}
STANDBY_GAP=${STANDBY_GAP:-250ms}
IDLE=${IDLE:-40}
INPROC_RUNS=${INPROC_RUNS:-300}
CPU_RUNS=${CPU_RUNS:-40}
BWRAP="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true"

# What the benchmarks need.
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
[ -x /usr/bin/time ] || need+=(time)
if want srt; then
	command -v socat >/dev/null || need+=(socat)
	command -v rg >/dev/null || need+=(ripgrep)
fi
if [ ${#need[@]} -gt 0 ]; then
	echo "bench: installing ${need[*]}" >&2
	if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if want srt; then
	command -v npm >/dev/null || { echo "bench: srt needs node and npm (apt-get install nodejs npm)" >&2; exit 1; }
	(cd bench && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

work=$(mktemp -d)
export XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config
sb="$work/sandbox"
cleanup() {
	"$sb" delete --all >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
PROGRAM=${PROGRAM:-sandbox}
CGO_ENABLED=0 go build -trimpath -o "$work/sandbox" ./cmd/sandbox
if [ "$PROGRAM" != sandbox ]; then
	CGO_ENABLED=0 go build -trimpath -o "$work/$PROGRAM" "./cmd/$PROGRAM"
	sb="$work/$PROGRAM"
fi
go build -o "$work/pair" ./bench/pair
go build -o "$work/fanout" ./bench/fanout
section() { printf '\n== %s\n' "$*"; }

if want exec || want srt || want cpu; then
	id=$("$sb" create 2>/dev/null)
fi

if want exec; then
	section "exec -- true on a running sandbox (cold CLI) vs bwrap, back to back; target <= 1.00x"
	"$work/pair" -n "$EXEC_RUNS" "$sb --sandbox-id $id exec -- true" "$BWRAP"
	section "exec -- true on a running sandbox (cold CLI) vs bwrap, $GAP before each run; target <= 1.00x"
	"$work/pair" -n "$EXEC_RUNS" -gap "$GAP" "$sb --sandbox-id $id exec -- true" "$BWRAP"
fi

if want inproc; then
	section "in process (go test -bench, provider calls): exec true and a small read <= 2 ms; start + exec reported"
	(cd "$root" && go test -run '^$' -bench 'BenchmarkExecTrue$|BenchmarkReadFile$|BenchmarkStartExec$' -benchtime "${INPROC_RUNS}x" ./providers/local/) |
		awk '/^Benchmark/ { printf "%-28s %8.2f ms/op\n", $1, $3 / 1e6 }'
fi
if want start; then
	section "start + exec: the first exec of a stopped sandbox vs one bwrap exec; target <= 3.00x"
	stopped=$("$sb" create 2>/dev/null)
	"$work/pair" -n "$RUNS" -gap "$STANDBY_GAP" -before "$sb --sandbox-id $stopped stop >/dev/null" "$sb --sandbox-id $stopped exec -- true" "$BWRAP"
	section "start + exec as above, without standby machines (SANDBOX_LOCAL_STANDBY=0)"
	"$work/pair" -n "$RUNS" -gap "$GAP" -before "$sb --sandbox-id $stopped stop >/dev/null" "SANDBOX_LOCAL_STANDBY=0 $sb --sandbox-id $stopped exec -- true" "$BWRAP"
	"$sb" delete "$stopped" >/dev/null
fi
if want create; then
	section "create + exec + delete vs one bwrap exec; target <= 3.00x"
	"$work/pair" -n "$RUNS" -gap "$STANDBY_GAP" "$sb exec -- true 2>/dev/null" "$BWRAP"
	section "create + exec + delete as above, without standby machines (SANDBOX_LOCAL_STANDBY=0)"
	"$work/pair" -n "$RUNS" -gap "$GAP" "SANDBOX_LOCAL_STANDBY=0 $sb exec -- true 2>/dev/null" "$BWRAP"
	if [ -d /dev/shm ] && shm=$(mktemp -d -p /dev/shm 2>/dev/null); then
		section "create + exec + delete vs one bwrap exec, state directory on tmpfs"
		"$work/pair" -n "$RUNS" -gap "$STANDBY_GAP" "XDG_STATE_HOME=$shm $sb exec -- true 2>/dev/null" "$BWRAP"
		XDG_STATE_HOME=$shm "$sb" delete --all >/dev/null 2>&1 || true
		rm -rf "$shm"
	fi
fi

if want cpu; then
	section "CPU time of the whole host per run (all processes and the kernel; needs an otherwise idle host), against one bwrap exec; reported"
	# busy: the host's busy jiffies so far (user, nice, system, irq,
	# softirq; not steal, which a neighbour's load adds to wall time).
	busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
	# cpu_per LABEL COMMAND [BEFORE]: CPU ms per run of COMMAND, over
	# CPU_RUNS runs, each after BEFORE (not counted: CPU time is taken
	# around COMMAND alone).
	cpu_per() {
		local total=0 b0 i
		for ((i = 0; i < CPU_RUNS; i++)); do
			[ -z "${3:-}" ] || eval "$3" >/dev/null 2>&1
			sleep 0.05
			b0=$(busy)
			eval "$2" >/dev/null 2>&1
			sleep 0.1 # what the run left running (a successor runner, a reaper)
			total=$((total + $(busy) - b0))
		done
		awk -v label="$1" -v t="$total" -v n="$CPU_RUNS" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%-28s %7.1f ms CPU\n", label, t * 1000 / hz / n}'
	}
	cpu_per "bwrap exec" "$BWRAP"
	cpu_per "exec, running sandbox" "$sb --sandbox-id $id exec -- true"
	cstop=$("$sb" create 2>/dev/null)
	cpu_per "start + exec" "$sb --sandbox-id $cstop exec -- true" "$sb --sandbox-id $cstop stop"
	"$sb" delete "$cstop" >/dev/null
	cpu_per "create + exec + delete" "$sb exec -- true"
fi

if want srt; then
	section "exec -- true on a reused sandbox vs srt (sandbox-runtime, wraps bwrap); reported"
	"$work/pair" -n "$(( (RUNS + 1) / 2 ))" -gap "$GAP" "$sb --sandbox-id $id exec -- true" "$root/bench/node_modules/.bin/srt true"
fi

if want stream; then
	section "streams of ${SIZE_MB} MiB: throughput vs cat/cp (target >= 0.50x), CLI peak RSS (target <= 64 MiB)"
	sid=$("$sb" create 2>/dev/null)
	big=$work/big
	head -c "$((SIZE_MB << 20))" /dev/urandom >"$big"
	bytes=$((SIZE_MB << 20))
	# timed NAME CMD: runs CMD once, appends its wall time (ns) to
	# $work/NAME.t and the CLI's peak RSS (KiB, from $work/rss) to NAME.rss.
	# The first round is a warm-up, not recorded: the VM's first writes
	# of a few GiB into memory it has not touched yet are the slowest.
	warm=1
	timed() {
		local name=$1; shift
		rm -f "$work/rss"
		local t0 t1
		t0=$(date +%s%N)
		bash -o pipefail -c "$*"
		t1=$(date +%s%N)
		[ "$warm" = 1 ] && return 0
		echo $((t1 - t0)) >>"$work/$name.t"
		if [ -s "$work/rss" ]; then tail -1 "$work/rss" >>"$work/$name.rss"; fi
	}
	tv="/usr/bin/time -f %M -o $work/rss"
	# Each copy starts alike, untimed, on both sides: the previous version
	# of its target removed just before (on a VM, writing into memory just
	# freed and into memory the host has taken back differ by up to 5x).
	for round in $(seq 0 "$BIG_RUNS"); do
		[ "$round" -gt 0 ] && warm=0
		timed stdout "$tv $sb --sandbox-id $sid exec -- head -c $bytes /dev/zero | cat >/dev/null"
		timed cat "head -c $bytes /dev/zero | cat >/dev/null"
		"$sb" --sandbox-id "$sid" exec -- rm -f /workspace/big 2>/dev/null
		timed upload "$tv $sb --sandbox-id $sid upload $big /workspace/big"
		rm -f "$work/copy"
		timed cpup "cp $big $work/copy"
		rm -f "$work/down"
		timed download "$tv $sb --sandbox-id $sid download /workspace/big $work/down"
		rm -f "$work/copy"
		timed cpdown "cp $big $work/copy"
	done
	cmp "$big" "$work/down" || { echo "bench: downloaded file differs" >&2; exit 1; }
	median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
	best() { sort -n "$1" | head -1; }
	# Medians, and the best run of each side: on a VM whose memory the
	# host takes back and hands out again, a 1 GiB write varies by 5x from
	# one run to the next, and the best run is the least disturbed one.
	report() { # name ref label
		local m r bm br rss
		m=$(median "$work/$1.t"); r=$(median "$work/$2.t"); rss=$(sort -n "$work/$1.rss" | tail -1)
		bm=$(best "$work/$1.t"); br=$(best "$work/$2.t")
		awk -v m="$m" -v r="$r" -v bm="$bm" -v br="$br" -v b="$bytes" -v rss="$rss" -v l="$3" 'BEGIN {
			printf "%-9s %7.0f MiB/s vs %7.0f MiB/s  ratio %.2fx (best runs %.2fx)  CLI peak RSS %.1f MiB\n",
				l, b / 1048576 / (m / 1e9), b / 1048576 / (r / 1e9), r / m, br / bm, rss / 1024 }'
	}
	report stdout cat "stdout"
	report upload cpup "upload"
	report download cpdown "download"
	rm -f "$big" "$work/down" "$work/copy"
	"$sb" delete "$sid" >/dev/null
fi

if want concurrent; then
	section "64 concurrent execs into one sandbox: all succeed; p50, p99"
	one=$("$sb" create 2>/dev/null)
	cmds=()
	for _ in $(seq 64); do cmds+=("$sb --sandbox-id $one exec -- true"); done
	"$work/fanout" -rounds "$ROUNDS" "${cmds[@]}"
	"$sb" delete "$one" >/dev/null
	section "64 concurrent execs across 16 sandboxes: all succeed; p50, p99"
	ids=()
	for _ in $(seq 16); do ids+=("$("$sb" create 2>/dev/null)"); done
	cmds=()
	for i in $(seq 0 63); do cmds+=("$sb --sandbox-id ${ids[i % 16]} exec -- true"); done
	"$work/fanout" -rounds "$ROUNDS" "${cmds[@]}"
	# Gone before the next section: sixteen running machines would share
	# the binary's pages with the idle one, which could then not page
	# them out (MADV_PAGEOUT leaves pages other processes map).
	"$sb" delete "${ids[@]}" >/dev/null
fi
if want idle; then
	section "idle: host RSS of a running sandbox with nothing in it (its init and runners); target <= 10 MiB"
	idle=$("$sb" create 2>/dev/null)
	"$sb" --sandbox-id "$idle" exec -- true
	# mem FIELD PID: FIELD (Rss or Pss, KiB) of PID and all its
	# descendants; Pss shares the pages several processes map among them.
	mem() {
		local total=0 p kids
		total=$(awk -v f="$1:" '$1 == f {print $2}' "/proc/$2/smaps_rollup" 2>/dev/null || echo 0)
		kids=$(cat /proc/"$2"/task/*/children 2>/dev/null || true)
		for p in $kids; do total=$((total + $(mem "$1" "$p"))); done
		echo "$total"
	}
	both() { echo "$(mem Rss "$1") $(mem Pss "$1")" | awk '{printf "RSS %6.1f MiB  PSS %6.1f MiB", $1 / 1024, $2 / 1024}'; }
	pid=$(awk '{print $1}' "$XDG_STATE_HOME/sandbox/local/$idle/machine.pid")
	printf 'after an exec      %s (init and its spare runners)\n' "$(both "$pid")"
	sleep "$IDLE"
	printf 'idle for %ss       %s\n' "$IDLE" "$(both "$pid")"
	"$sb" delete "$idle" >/dev/null
fi
