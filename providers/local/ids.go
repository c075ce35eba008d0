//go:build linux

package local

import (
	"io"
	"strings"
)

// idPrefix starts every sandbox id; idLen random characters follow it.
const (
	idPrefix   = "sb-"
	idLen      = 10
	idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"
)

// newID returns a fresh sandbox id such as "sb-k3j9x2m4qa", drawing its
// randomness from r (crypto/rand.Reader in production). Fifty bits make
// collisions negligible, and Create retries on the rare clash anyway.
func newID(r io.Reader) string {
	var b [idLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		// crypto/rand never fails on Linux; a short read would be a bug.
		panic("local: reading random bytes: " + err.Error())
	}
	var sb strings.Builder
	sb.Grow(len(idPrefix) + idLen)
	sb.WriteString(idPrefix)
	for _, c := range b {
		sb.WriteByte(idAlphabet[c%byte(len(idAlphabet))])
	}
	return sb.String()
}

// validID reports whether id has the form newID produces. Every method checks
// it before the id becomes part of a path.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(rest) != idLen {
		return false
	}
	for i := range len(rest) {
		if strings.IndexByte(idAlphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}
