package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMessage(&buf, StreamEvent{Event: ProcessEvent{Data: &DataEvent{Stdout: []byte("hi\n")}}}); err != nil {
		t.Fatal(err)
	}
	if err := WriteEnvelope(&buf, FlagEndStream, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	if raw[0] != 0 || int(raw[4]) != len(`{"event":{"data":{"stdout":"aGkK"}}}`) {
		t.Errorf("envelope header = % x, want flag 0 and the JSON length", raw[:5])
	}
	flags, payload, err := ReadEnvelope(&buf)
	if err != nil || flags != 0 || string(payload) != `{"event":{"data":{"stdout":"aGkK"}}}` {
		t.Errorf("first envelope = %d %s %v", flags, payload, err)
	}
	flags, payload, err = ReadEnvelope(&buf)
	if err != nil || flags != FlagEndStream || string(payload) != `{}` {
		t.Errorf("end envelope = %d %s %v", flags, payload, err)
	}
	if _, _, err := ReadEnvelope(&buf); err != io.EOF {
		t.Errorf("after the last envelope: err = %v, want io.EOF", err)
	}
}

func TestReadEnvelopeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"cut header", []byte{0, 0, 0}, io.ErrUnexpectedEOF},
		{"cut payload", []byte{0, 0, 0, 0, 5, '{', '}'}, io.ErrUnexpectedEOF},
		{"too large", []byte{0, 0xff, 0xff, 0xff, 0xff}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadEnvelope(bytes.NewReader(tc.in))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("ReadEnvelope(% x) err = %v, want %v", tc.in, err, tc.want)
			}
		})
	}
}

func TestProtoJSONShapes(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"zero end omits everything", EndEvent{}, `{}`},
		{"end with code", EndEvent{ExitCode: 3, Exited: true, Status: "exit status 3"}, `{"exitCode":3,"exited":true,"status":"exit status 3"}`},
		{"signal by name", SendSignalRequest{Process: ProcessSelector{PID: 7}, Signal: SignalSIGKILL}, `{"process":{"pid":7},"signal":"SIGNAL_SIGKILL"}`},
		{"int64 size as string", EntryInfo{Name: "a", Type: FileTypeFile, Size: 12}, `{"name":"a","type":"FILE_TYPE_FILE","size":"12"}`},
		{"directory type", EntryInfo{Type: FileTypeDirectory}, `{"type":"FILE_TYPE_DIRECTORY"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil || string(b) != tc.want {
				t.Errorf("Marshal = %s, %v; want %s", b, err, tc.want)
			}
		})
	}
}

func TestEnumsAcceptNamesAndNumbers(t *testing.T) {
	for _, in := range []string{`{"signal":"SIGNAL_SIGTERM"}`, `{"signal":15}`} {
		var r SendSignalRequest
		if err := json.Unmarshal([]byte(in), &r); err != nil || r.Signal != SignalSIGTERM {
			t.Errorf("Unmarshal(%s) = %v, %v; want SIGTERM", in, r.Signal, err)
		}
	}
	for _, in := range []string{`{"type":"FILE_TYPE_SYMLINK","size":"5"}`, `{"type":3,"size":"5"}`} {
		var e EntryInfo
		if err := json.Unmarshal([]byte(in), &e); err != nil || e.Type != FileTypeSymlink || e.Size != 5 {
			t.Errorf("Unmarshal(%s) = %+v, %v", in, e, err)
		}
	}
	var r SendSignalRequest
	if err := json.Unmarshal([]byte(`{"signal":"SIGNAL_NOPE"}`), &r); err == nil {
		t.Error("an unknown enum name was accepted")
	}
}

// TestTimestampFormat checks the fraction has 9 digits, which protobuf
// parsers accept (they refuse Go's trimmed fractions such as ".5Z").
func TestTimestampFormat(t *testing.T) {
	ts := Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.FixedZone("x", 3600))}
	b, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^"2026-01-02T02:04:05\.500000000Z"$`).Match(b) {
		t.Errorf("Timestamp = %s, want UTC with nine fractional digits", b)
	}
	var back Timestamp
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(ts.Time) {
		t.Errorf("round trip = %v, %v", back, err)
	}
}
