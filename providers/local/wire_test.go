//go:build linux

package local

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// fillAll sets every exported field of v that travels (all but the
// host's providers.Resources) to a value of its own, recursively: strings
// with a newline and a NUL in them, negative and wide integers, lists of
// two, times in the local zone and in UTC. A field the codec forgets then
// fails the round trip.
func fillAll(t testing.TB, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch v.Type() {
	case reflect.TypeFor[providers.Resources]():
		return
	case reflect.TypeFor[time.Time]():
		t := time.Unix(1_700_000_000+int64(*n), int64(*n))
		if *n%2 == 0 {
			t = t.UTC()
		}
		v.Set(reflect.ValueOf(t))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d\n\x00é", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(-int64(*n) * 7919)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		u := uint64(1)<<40 + uint64(*n)
		if v.OverflowUint(u) {
			u = uint64(*n) * 1000003
		}
		v.SetUint(u)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillAll(t, s.Index(i), n)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(t, p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fillAll(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fillAll: a field of kind %s: teach the codec and this test about it", v.Kind())
	}
}

func TestConfigRoundTrip(t *testing.T) {
	var full initConfig
	n := 0
	fillAll(t, reflect.ValueOf(&full).Elem(), &n)
	full.Resources.CPUs = 2 // host-only: never sent
	for _, tc := range []struct {
		name string
		cfg  initConfig
	}{
		{"every field set", full},
		{"zero", initConfig{}},
		{"an exec", initConfig{Mode: modeExec, Argv: []string{"sh", "-c", "echo 'a\nb'"}, Env: []string{"PATH=/bin", "X="}, Cwd: "/workspace"}},
		{"a file operation without grep", initConfig{Mode: modeFile, File: &fileRequest{Op: opRead, Path: "/tmp/x", NoFollow: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeConfig(&buf, &tc.cfg); err != nil {
				t.Fatal(err)
			}
			buf.WriteString("after") // what follows a frame stays in the reader
			r := bufio.NewReader(&buf)
			got, err := readConfig(r)
			if err != nil {
				t.Fatalf("readConfig: %v", err)
			}
			want := tc.cfg
			want.Resources = got.Resources
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
			if got.Resources.CPUs != 0 {
				t.Errorf("Resources travelled: %+v", got.Resources)
			}
			if rest, _ := io.ReadAll(r); string(rest) != "after" {
				t.Errorf("after the frame the reader holds %q, want %q", rest, "after")
			}
		})
	}
}

// TestMessageRoundTrip: each of the other messages, every field set and
// none, comes back as it went.
func TestMessageRoundTrip(t *testing.T) {
	roundTrip := func(t *testing.T, v any, encode func() []byte, decode func([]byte) (any, error)) {
		t.Helper()
		got, err := decode(encode())
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, v)
		}
		body := encode()
		if _, err := decode(body[:len(body)-1]); !errors.Is(err, errFrame) {
			t.Errorf("decode of a body cut short = %v, want errFrame", err)
		}
	}
	for _, full := range []bool{true, false} {
		t.Run(fmt.Sprintf("every field set %v", full), func(t *testing.T) {
			var (
				st  statusMsg
				req machineRequest
				rep machineReply
				g   machineGate
			)
			if full {
				n := 0
				for _, p := range []any{&st, &req, &rep, &g} {
					fillAll(t, reflect.ValueOf(p).Elem(), &n)
				}
			}
			roundTrip(t, st, func() []byte { return encodeStatus(&st) }, func(b []byte) (any, error) { return decodeStatus(b) })
			roundTrip(t, req, func() []byte { return encodeRequest(&req) }, func(b []byte) (any, error) { return decodeRequest(b) })
			roundTrip(t, rep, func() []byte { return encodeReply(&rep) }, func(b []byte) (any, error) { return decodeReply(b) })
			roundTrip(t, g, func() []byte { return encodeGate(&g) }, func(b []byte) (any, error) { return decodeGate(b) })
		})
	}
}

func TestConfigDecodeErrors(t *testing.T) {
	body := encodeConfig(&initConfig{Mode: modeExec, Argv: []string{"true"}})
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, io.EOF},
		{"a length cut short", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"a body cut short", appendFrame(nil, body)[:len(body)], io.ErrUnexpectedEOF},
		{"a large body cut short", appendFrame(nil, make([]byte, smallFrame+10))[:smallFrame], io.ErrUnexpectedEOF},
		{"a body too large", []byte{0xff, 0xff, 0xff, 0xff}, errFrame},
		{"fields cut short", appendFrame(nil, body[:len(body)-3]), errFrame},
		{"a byte left over", appendFrame(nil, append(bytes.Clone(body), 0)), errFrame},
		// Mode, Root, Skel, then the root layer's five strings and a
		// bool that is neither 0 nor 1.
		{"a bool out of range", appendFrame(nil, []byte{4, 'e', 'x', 'e', 'c', 0, 0, 0, 0, 0, 0, 0, 7}), errFrame},
		{"a length past the end", appendFrame(nil, []byte{0x7f, 'x'}), errFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readConfig(bufio.NewReader(bytes.NewReader(tc.frame)))
			if !errors.Is(err, tc.want) {
				t.Errorf("readConfig = %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzDecodeConfig: no input makes the decoder panic, and what it
// accepts encodes to a message that decodes to the same configuration.
func FuzzDecodeConfig(f *testing.F) {
	var full initConfig
	n := 0
	fillAll(f, reflect.ValueOf(&full).Elem(), &n)
	f.Add(encodeConfig(&full))
	f.Add(encodeConfig(&initConfig{Mode: modeExec, Argv: []string{"true"}}))
	f.Add([]byte(strings.Repeat("\xff", 16)))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := decodeConfig(b)
		if err != nil {
			return
		}
		again, err := decodeConfig(encodeConfig(&cfg))
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("re-encoded %+v decodes to %+v, %v", cfg, again, err)
		}
	})
}
