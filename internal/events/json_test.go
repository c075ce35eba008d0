package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// tricky are the strings every string field is tried with: what JSON
// escapes, what encoding/json replaces or escapes on its own (invalid
// UTF-8, U+2028, U+2029) and what an HTML-escaping encoder escapes.
var tricky = []string{
	"plain",
	"q\"b\\s/\n\r\t\b\f\x00\x01\x1f\x7f",
	"<a href='x'>&amp;</a>",
	"é ☃ 😀 \u2028 \u2029 \ufffd",
	"bad \xff \xc3 utf-8 \xed\xa0\x80",
	"",
}

// fill sets every field of the value v points to, recursively, with
// values derived from seed: a field the encoder forgets shows up in the
// comparison with encoding/json.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), seed)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			zone := time.FixedZone("X", (seed%5-2)*3600+seed%3*1800)
			v.Set(reflect.ValueOf(time.Date(2026, time.Month(seed%12+1), seed%28+1, 3, 4, 5, seed*123457%1000000000, zone)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed+i+1)
			}
		}
	case reflect.String:
		v.SetString(tricky[seed%len(tricky)] + strings.Repeat("x", seed%3))
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{-7, 1 << 40, 3, -1 << 62}[seed%4])
	case reflect.Float64:
		v.SetFloat([]float64{0.5, 2, 1e-7, 3e21, 1.25e-5}[seed%5])
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			fill(s.Index(i), seed+i)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 4 {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, seed+i*7)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, seed+i)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic("fill: no rule for " + v.Type().String())
	}
}

// encodings of e by every encoder this program uses, MarshalJSON's and the
// reference (encoding/json on the fields), for both HTML settings.
func encodings(t *testing.T, e Event) (got, want [2]string) {
	t.Helper()
	for i, html := range []bool{false, true} {
		var g, w bytes.Buffer
		ge, we := json.NewEncoder(&g), json.NewEncoder(&w)
		ge.SetEscapeHTML(html)
		we.SetEscapeHTML(html)
		if err := ge.Encode(e); err != nil {
			t.Fatalf("encode: %v", err)
		}
		if err := we.Encode(plainEvent(e)); err != nil {
			t.Fatalf("reference encode: %v", err)
		}
		got[i], want[i] = g.String(), w.String()
	}
	return got, want
}

// TestMarshalJSONMatchesEncodingJSON: the hand-written encoding (not a
// fallback to reflection) is what encoding/json writes for the same
// fields, with every field set (by reflection, so a field added later is
// covered), with each one set alone (its omitempty), with none set, and
// for the values whose encoding has rules of its own.
func TestMarshalJSONMatchesEncodingJSON(t *testing.T) {
	cases := map[string]Event{"zero": {}, "only time": {Time: time.Unix(0, 1).UTC()}}
	for seed := range 12 {
		var e Event
		fill(reflect.ValueOf(&e), seed)
		cases["full "+string(rune('a'+seed))] = e
	}
	var full Event
	fill(reflect.ValueOf(&full), 1)
	for i := range reflect.TypeFor[Event]().NumField() {
		var e Event
		reflect.ValueOf(&e).Elem().Field(i).Set(reflect.ValueOf(full).Field(i))
		cases["only "+reflect.TypeFor[Event]().Field(i).Name] = e
	}
	zeroes := Event{Allow: Ptr(false), DurationMS: Ptr(int64(0)), ExitCode: Ptr(0), Argv: []string{}, Details: &Details{Files: []File{{}}},
		Sandbox: &Sandbox{Labels: map[string]string{}, Resources: &providers.Resources{CPUs: -0.0}}}
	cases["zero values behind pointers"] = zeroes
	cases["nil labels"] = Event{Sandbox: &Sandbox{ID: "sb-1"}}
	for _, f := range []float64{1e20, 1e21, 123456789.125, 1e-6, 9.99e-7, 5e-324, 1.7976931348623157e308, -2.5} {
		cases["cpus "+string(appendFloat(nil, f))] = Event{Sandbox: &Sandbox{Resources: &providers.Resources{CPUs: f}}}
	}
	for name, e := range cases {
		// The hand-written path itself, not encoding/json's fallback,
		// must give the reference.
		if !e.plainValues() {
			t.Errorf("%s: MarshalJSON would leave it to encoding/json", name)
		}
		got, want := encodings(t, e)
		if direct := string(appendEvent(nil, &e)) + "\n"; direct != want[0] {
			t.Errorf("%s, written directly:\n got %s\nwant %s", name, direct, want[0])
		}
		if b, ok := e.AppendJSON(nil); !ok || string(b)+"\n" != want[0] {
			t.Errorf("%s, AppendJSON (%v):\n got %s\nwant %s", name, ok, b, want[0])
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s (escape HTML %v):\n got %s\nwant %s", name, i == 1, got[i], want[i])
			}
		}
	}
}

// TestMarshalJSONRefusesWhatEncodingJSONRefuses: a time or number that
// encoding/json cannot encode is an error here too, not a line of JSON
// that readers would take.
func TestMarshalJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	nan := 0.0
	nan /= nan
	for name, e := range map[string]Event{
		"year 10000":  {Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year -1":     {Sandbox: &Sandbox{CreatedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		"zone 24h":    {Details: &Details{Files: []File{{ModTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("Z", 24*3600))}}}},
		"cpus is NaN": {Sandbox: &Sandbox{Resources: &providers.Resources{CPUs: nan}}},
	} {
		if b, err := json.Marshal(e); err == nil {
			t.Errorf("%s: encoded as %s, want an error", name, b)
		}
		if b, ok := e.AppendJSON(nil); ok {
			t.Errorf("%s: AppendJSON wrote %s, want it left to encoding/json", name, b)
		}
	}
}

// BenchmarkEventEncode encodes a typical call.requested event.
func BenchmarkEventEncode(b *testing.B) {
	e := Event{Type: CallRequested, Time: time.Now(), CallID: "c1", Source: "cli", Kind: "exec", Target: "true", Argv: []string{"true"}, Provider: "local", SandboxID: "sb-1", Details: &Details{Cwd: "/workspace"}}
	for b.Loop() {
		if _, err := e.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
