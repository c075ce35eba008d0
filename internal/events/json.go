package events

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentbox/sandbox/providers"
)

// plainEvent is Event without its MarshalJSON: what encoding/json makes of
// its fields and tags, which MarshalJSON must produce byte for byte (the
// tests hold it to that) and falls back to for the values it does not
// write itself.
type plainEvent Event

// MarshalJSON encodes the event as encoding/json encodes its fields, without
// reflection: a program that writes one or two events (every CLI call
// audits its operation) would otherwise spend more time building
// encoding/json's encoders for these types than on all of its other JSON.
// Like every Marshaler's output, the encoder that calls it compacts it
// and, unless told not to, escapes HTML characters.
func (e Event) MarshalJSON() ([]byte, error) {
	if b, ok := e.AppendJSON(make([]byte, 0, 256)); ok {
		return b, nil
	}
	return json.Marshal(plainEvent(e))
}

// AppendJSON appends e to b as MarshalJSON writes it, unless its values
// are ones MarshalJSON leaves to encoding/json (ok false); it is
// output.Appender's.
func (e Event) AppendJSON(b []byte) (_ []byte, ok bool) {
	if !e.plainValues() {
		return b, false
	}
	return appendEvent(b, &e), true
}

// appendEvent writes e, whose values plainValues takes, as MarshalJSON does.
func appendEvent(b []byte, e *Event) []byte {
	w := objectWriter{b: b}
	w.str("type", e.Type)
	w.time("time", e.Time)
	w.strOmit("run_id", e.RunID)
	w.strOmit("version", e.Version)
	if e.Sandbox != nil {
		w.key("sandbox")
		w.b = appendSandbox(w.b, e.Sandbox)
	}
	w.strOmit("reattach", e.Reattach)
	w.strOmit("call_id", e.CallID)
	w.strOmit("source", e.Source)
	w.strOmit("kind", e.Kind)
	w.strOmit("target", e.Target)
	if len(e.Argv) > 0 {
		w.key("argv")
		w.b = appendList(w.b, e.Argv, appendString)
	}
	w.strOmit("provider", e.Provider)
	w.strOmit("sandbox_id", e.SandboxID)
	if e.Details != nil {
		w.key("details")
		w.b = appendDetails(w.b, e.Details)
	}
	if e.Allow != nil {
		w.key("allow")
		w.b = strconv.AppendBool(w.b, *e.Allow)
	}
	w.strOmit("by", e.By)
	w.strOmit("rule", e.Rule)
	w.strOmit("reason", e.Reason)
	w.strOmit("stream", e.Stream)
	w.strOmit("data", e.Data)
	w.strOmit("data_b64", e.DataB64)
	w.strOmit("status", e.Status)
	if e.DurationMS != nil {
		w.int("duration_ms", *e.DurationMS)
	}
	w.intOmit("step", int64(e.Step))
	w.intOmit("line", int64(e.Line))
	if e.ExitCode != nil {
		w.int("exit_code", int64(*e.ExitCode))
	}
	w.strOmit("error", e.Error)
	return w.end()
}

// plainValues says whether MarshalJSON can write every value of e: not the
// times and numbers that encoding/json refuses (a year past 9999, NaN),
// whose errors it leaves to encoding/json.
func (e *Event) plainValues() bool {
	if !plainTime(e.Time) {
		return false
	}
	if s := e.Sandbox; s != nil {
		if !plainTime(s.CreatedAt) || !plainTime(s.ExpiresAt) {
			return false
		}
		if s.Resources != nil && (math.IsNaN(s.Resources.CPUs) || math.IsInf(s.Resources.CPUs, 0)) {
			return false
		}
	}
	if e.Details != nil {
		for _, f := range e.Details.Files {
			if !plainTime(f.ModTime) {
				return false
			}
		}
	}
	return true
}

// plainTime says whether time.Time's MarshalJSON takes t: a year of four
// digits and a zone less than a day off UTC.
func plainTime(t time.Time) bool {
	_, offset := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && offset > -24*3600 && offset < 24*3600
}

func appendSandbox(b []byte, s *Sandbox) []byte {
	w := objectWriter{b: b}
	w.str("id", s.ID)
	w.str("provider", s.Provider)
	w.str("state", s.State)
	w.key("labels")
	if s.Labels == nil {
		w.b = append(w.b, "null"...)
	} else {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		lw := objectWriter{b: w.b}
		for _, k := range keys {
			lw.str(k, s.Labels[k])
		}
		w.b = lw.end()
	}
	w.timeOmit("created_at", s.CreatedAt)
	w.timeOmit("expires_at", s.ExpiresAt)
	w.strOmit("image", s.Image)
	w.strOmit("network", s.Network)
	w.strOmit("isolation", s.Isolation)
	w.strOmit("user", s.User)
	if s.Resources != nil {
		w.key("resources")
		w.b = appendResources(w.b, s.Resources)
	}
	w.intOmit("auto_stop_seconds", s.AutoStopSeconds)
	return w.end()
}

func appendResources(b []byte, r *providers.Resources) []byte {
	w := objectWriter{b: b}
	if r.CPUs != 0 {
		w.key("cpus")
		w.b = appendFloat(w.b, r.CPUs)
	}
	w.intOmit("memory_mb", int64(r.MemoryMB))
	w.intOmit("pids", int64(r.Pids))
	w.intOmit("disk_mb", int64(r.DiskMB))
	return w.end()
}

func appendDetails(b []byte, d *Details) []byte {
	w := objectWriter{b: b}
	w.strOmit("cwd", d.Cwd)
	w.strOmit("user", d.User)
	w.trueOmit("background", d.Background)
	w.strOmit("diff", d.Diff)
	w.intOmit("bytes", d.Bytes)
	w.strOmit("dest", d.Dest)
	w.strOmit("from", d.From)
	w.strOmit("pattern", d.Pattern)
	w.strOmit("resolved", d.Resolved)
	w.strOmit("resolved_dest", d.ResolvedDest)
	if len(d.Files) > 0 {
		w.key("files")
		w.b = appendList(w.b, d.Files, appendFile)
	}
	return w.end()
}

func appendFile(b []byte, f File) []byte {
	w := objectWriter{b: b}
	w.str("path", f.Path)
	w.strOmit("type", f.Type)
	w.strOmit("mode", f.Mode)
	w.int("size", f.Size)
	w.timeOmit("mod_time", f.ModTime)
	w.strOmit("target", f.Target)
	w.strOmit("sha256", f.SHA256)
	w.trueOmit("exists", f.Exists)
	return w.end()
}

// appendList writes items as a JSON array, each as add writes it.
func appendList[T any](b []byte, items []T, add func([]byte, T) []byte) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = add(b, it)
	}
	return append(b, ']')
}

// objectWriter appends the members of one JSON object to b.
type objectWriter struct {
	b    []byte
	some bool
}

func (w *objectWriter) key(k string) {
	if w.some {
		w.b = append(w.b, ',')
	} else {
		w.b = append(w.b, '{')
		w.some = true
	}
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
}

func (w *objectWriter) str(k, v string) {
	w.key(k)
	w.b = appendString(w.b, v)
}

// strOmit is str for a field tagged omitempty.
func (w *objectWriter) strOmit(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *objectWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

// intOmit is int for a field tagged omitempty.
func (w *objectWriter) intOmit(k string, v int64) {
	if v != 0 {
		w.int(k, v)
	}
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with the
// nanoseconds it has), for a year that it takes (see plainValues).
func (w *objectWriter) time(k string, t time.Time) {
	w.key(k)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

// timeOmit is time for a field tagged omitzero.
func (w *objectWriter) timeOmit(k string, t time.Time) {
	if !t.IsZero() {
		w.time(k, t)
	}
}

// trueOmit writes a bool field tagged omitempty.
func (w *objectWriter) trueOmit(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

// end closes the object: {} when it has no member.
func (w *objectWriter) end() []byte {
	if !w.some {
		return append(w.b, '{', '}')
	}
	return append(w.b, '}')
}

// appendFloat writes a finite float64 as encoding/json does: the shortest
// form that reads back the same, with an exponent only for very small or
// very large values.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 becomes 1e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string as encoding/json does without HTML
// escaping: quotes, backslashes and control characters escaped, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 as \u escapes.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
