package emulator

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// Metrics. E2B samples each sandbox every few seconds; the emulator takes
// a sample when asked (at most one per metricsEvery) by running
// metricsScript in the sandbox, and keeps the samples for later
// time-range queries. CPU and memory are what the sandbox sees in /proc
// (its machine's, which for the local provider is the host's: its
// sandboxes do not mount their cgroup), disk is its root filesystem's.
const (
	metricsEvery = time.Second
	maxSamples   = 720
)

// metricsScript prints two /proc/stat cpu lines 200 ms apart, the CPU
// count, /proc/meminfo, and df's line for /.
const metricsScript = `head -n1 /proc/stat; sleep 0.2; head -n1 /proc/stat
echo ncpu $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
cat /proc/meminfo
df -kP / | tail -n1 | sed 's/^/disk /'`

// handleMetrics answers GET /sandboxes/{id}/metrics?start=&end= (Unix
// seconds) with the samples in that range, taking a new one when the
// range reaches now.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxFor(w, r)
	if sb == nil {
		return
	}
	now := s.now()
	start, end := sb.started.Add(-time.Second), now
	for name, t := range map[string]*time.Time{"start": &start, "end": &end} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "invalid "+name+": "+err.Error())
				return
			}
			*t = time.Unix(n, 0)
		}
	}
	s.mu.Lock()
	paused := sb.paused
	s.mu.Unlock()
	// The query's seconds are rounded: a range that ends within a second
	// of now includes now.
	if !paused && !end.Add(time.Second).Before(now) {
		sb.metricsMu.Lock()
		fresh := len(sb.samples) > 0 && now.Sub(sb.samples[len(sb.samples)-1].Timestamp) < metricsEvery
		sb.metricsMu.Unlock()
		if !fresh {
			m, err := s.sample(r.Context(), sb)
			if err != nil {
				writeAPIError(w, statusOf(err), "reading the sandbox's metrics: "+err.Error())
				return
			}
			sb.metricsMu.Lock()
			sb.samples = append(sb.samples, m)
			if len(sb.samples) > maxSamples {
				sb.samples = sb.samples[len(sb.samples)-maxSamples:]
			}
			sb.metricsMu.Unlock()
		}
	}
	out := []wire.SandboxMetric{}
	sb.metricsMu.Lock()
	for _, m := range sb.samples {
		if !m.Timestamp.Before(start.Truncate(time.Second)) && !m.Timestamp.After(end.Add(time.Second)) {
			out = append(out, m)
		}
	}
	sb.metricsMu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// sample takes one metrics sample of sb.
func (s *Server) sample(ctx context.Context, sb *sandbox) (wire.SandboxMetric, error) {
	var stdout bytes.Buffer
	res, err := s.backend.Exec(ctx, sb.backendID, providers.ExecRequest{Argv: []string{"/bin/sh", "-c", metricsScript}, Cwd: "/", Stdout: &stdout})
	if err != nil {
		return wire.SandboxMetric{}, err
	}
	if res.ExitCode != 0 {
		return wire.SandboxMetric{}, providers.Errorf(providers.ErrUnavailable, "e2b-emulator", "metrics", "the metrics script exited with status %d", res.ExitCode)
	}
	now := s.now().UTC()
	m := parseMetrics(stdout.String())
	m.Timestamp, m.TimestampUnix = now, now.Unix()
	return m, nil
}

// parseMetrics reads metricsScript's output; what is missing stays zero.
func parseMetrics(out string) wire.SandboxMetric {
	var m wire.SandboxMetric
	var cpu [][]int64
	mem := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch {
		case f[0] == "cpu":
			var vals []int64
			for _, v := range f[1:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				vals = append(vals, n)
			}
			cpu = append(cpu, vals)
		case f[0] == "ncpu":
			m.CPUCount, _ = strconv.Atoi(f[1])
		case f[0] == "disk" && len(f) >= 4:
			total, _ := strconv.ParseInt(f[2], 10, 64)
			used, _ := strconv.ParseInt(f[3], 10, 64)
			m.DiskTotal, m.DiskUsed = total*1024, used*1024
		case strings.HasSuffix(f[0], ":"):
			n, _ := strconv.ParseInt(f[1], 10, 64)
			mem[strings.TrimSuffix(f[0], ":")] = n * 1024
		}
	}
	m.MemTotal, m.MemCache = mem["MemTotal"], mem["Cached"]
	m.MemUsed = max(mem["MemTotal"]-mem["MemAvailable"], 0)
	if len(cpu) == 2 {
		busy, total := cpuTimes(cpu[1])
		busy0, total0 := cpuTimes(cpu[0])
		if d := total - total0; d > 0 {
			m.CPUUsedPct = float64(busy-busy0) * 100 / float64(d)
		}
	}
	return m
}

// cpuTimes sums a /proc/stat cpu line: busy time and all time (idle and
// iowait are the 4th and 5th fields).
func cpuTimes(v []int64) (busy, total int64) {
	for i, n := range v {
		if i >= 8 {
			break // guest times are counted in user and nice already
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}
