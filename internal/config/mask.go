package config

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/agentbox/sandbox/internal/output"
)

// MaskText replaces secret values in output.
const MaskText = "***"

// minSecretLen keeps short values (which would mask ordinary words) out.
const minSecretLen = 4

// Masker replaces registered secret values with MaskText. The zero value
// masks nothing. It is safe for concurrent use once built.
type Masker struct {
	secrets [][]byte // longest first, so a longer secret wins over its prefix
	maxLen  int
	// encoded are the secrets as they appear inside an encoded JSON
	// string (see JSON), longest first.
	encoded []string
}

// NewMasker returns a masker for the given values; values shorter than four
// bytes are ignored.
func NewMasker(values ...string) *Masker {
	m := &Masker{}
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) < minSecretLen || seen[v] {
			continue
		}
		seen[v] = true
		m.secrets = append(m.secrets, []byte(v))
		m.maxLen = max(m.maxLen, len(v))
	}
	sort.Slice(m.secrets, func(i, j int) bool { return len(m.secrets[i]) > len(m.secrets[j]) })
	forms := map[string]bool{}
	for _, sec := range m.secrets {
		for _, f := range jsonForms(string(sec)) {
			if !forms[f] {
				forms[f] = true
				m.encoded = append(m.encoded, f)
			}
		}
	}
	sort.Slice(m.encoded, func(i, j int) bool { return len(m.encoded[i]) > len(m.encoded[j]) })
	return m
}

// jsonForms returns how a secret looks inside an encoded JSON string:
// as this program encodes it (output.Marshal: no HTML escaping, invisible
// characters as \u escapes) and as a default encoder does ("<", ">" and
// "&" as \u escapes too).
func jsonForms(secret string) []string {
	var out []string
	if b, err := output.Marshal(secret); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	if b, err := json.Marshal(secret); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	return out
}

// SecretsOf returns the values of env whose names look secret.
func SecretsOf(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if IsSecretName(k) {
			out = append(out, v)
		}
	}
	return out
}

// Empty reports whether nothing would be masked.
func (m *Masker) Empty() bool { return m == nil || len(m.secrets) == 0 }

// String masks s.
func (m *Masker) String(s string) string {
	if m.Empty() {
		return s
	}
	for _, sec := range m.secrets {
		s = strings.ReplaceAll(s, string(sec), MaskText)
	}
	return s
}

// JSON masks s, a line of encoded JSON, by replacing each secret in the
// form it takes inside an encoded JSON string: quotes, backslashes,
// control characters and (with a default encoder) "<", ">" and "&" are
// escaped there, so String alone would miss a secret holding them. This
// is a second line of defence: output that carries secrets is masked
// before it is encoded, where a secret split across writes is caught too.
func (m *Masker) JSON(s string) string {
	if m.Empty() {
		return s
	}
	for _, f := range m.encoded {
		s = strings.ReplaceAll(s, f, MaskText)
	}
	return s
}

// Writer wraps w so that secrets are masked even when a secret is split
// across writes. Bytes that could start a secret are held back until the
// next write or Close; Close flushes and does not close w.
func (m *Masker) Writer(w io.Writer) io.WriteCloser {
	if m.Empty() {
		return nopCloser{w}
	}
	return &maskWriter{m: m, w: w}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type maskWriter struct {
	mu  sync.Mutex
	m   *Masker
	w   io.Writer
	buf []byte // held back: it may be the start of a secret
	out []byte // the masked output's buffer, kept from write to write
}

func (mw *maskWriter) Write(p []byte) (int, error) {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	in := p
	if len(mw.buf) > 0 {
		mw.buf = append(mw.buf, p...)
		in = mw.buf
	}
	out, rest := mw.m.split(mw.out[:0], in)
	mw.out = out
	if len(out) > 0 {
		if _, err := mw.w.Write(out); err != nil {
			return 0, err
		}
	}
	mw.buf = append(mw.buf[:0], rest...)
	return len(p), nil
}

func (mw *maskWriter) Close() error {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if len(mw.buf) == 0 {
		return nil
	}
	_, err := mw.w.Write([]byte(mw.m.String(string(mw.buf))))
	mw.buf = mw.buf[:0]
	return err
}

// split masks every complete secret in b and returns the masked output that
// is safe to emit, appended to dst, plus a tail of b that may be the start of
// a secret. Up to the last maxLen-1 bytes, where no secret can be
// incomplete, the secrets are found with bytes.Index and what lies between
// is copied at once (comparing every byte with every secret made a
// command's masked output stream at 45 MB/s); the tail goes a byte at a
// time.
func (m *Masker) split(dst, b []byte) (out, rest []byte) {
	res := bytes.NewBuffer(dst)
	tail := max(0, len(b)-(m.maxLen-1))
	i := 0
	for i < tail {
		p, sec := m.nextMatch(b, i, tail)
		if sec == nil {
			res.Write(b[i:tail])
			i = tail
			break
		}
		res.Write(b[i:p])
		res.WriteString(MaskText)
		i = p + len(sec)
	}
	return m.splitBytes(res, b, i)
}

// splitBytes is split from b[i:] on, a byte at a time: at each byte the
// longest secret that begins there is masked, and a tail that may be the
// start of a longer one is held back.
func (m *Masker) splitBytes(res *bytes.Buffer, b []byte, i int) (out, rest []byte) {
	for i < len(b) {
		matched := false
		for _, sec := range m.secrets { // longest first
			n := len(b) - i
			if n < len(sec) {
				if bytes.Equal(b[i:], sec[:n]) {
					// A longer secret may still complete: hold the tail.
					return res.Bytes(), b[i:]
				}
				continue
			}
			if bytes.Equal(b[i:i+len(sec)], sec) {
				res.WriteString(MaskText)
				i += len(sec)
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		res.WriteByte(b[i])
		i++
	}
	return res.Bytes(), nil
}

// nextMatch is the first position p in [i, end) where a whole secret
// begins in b, and the longest secret there (nil if none begins there).
func (m *Masker) nextMatch(b []byte, i, end int) (int, []byte) {
	best, found := 0, []byte(nil)
	for _, sec := range m.secrets { // longest first: it keeps a tie
		limit := len(b)
		if found != nil {
			limit = min(limit, best-1+len(sec)) // to begin before best
		}
		if limit-i < len(sec) {
			continue
		}
		k := bytes.Index(b[i:limit], sec)
		if k < 0 || i+k >= end {
			continue
		}
		if found == nil || i+k < best {
			best, found = i+k, sec
		}
	}
	return best, found
}
