package emulator

import (
	"crypto/rand"
	"encoding/hex"
)

// RandomHex returns n random bytes in hex (2n characters): the API keys an
// emulator makes up when none is given, its ids and signing keys.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
