//go:build linux

package emulator

// FileURLSignatureForTest exposes fileURLSignature to the external tests.
func FileURLSignatureForTest(key, method, path, expires string) string {
	return fileURLSignature(key, method, path, expires)
}
