//go:build !linux

package engine

import "golang.org/x/sys/unix"

// exchangeFiles has no atomic exchange outside Linux: ENOSYS makes the
// caller rename instead.
func exchangeFiles(_, _ string) error {
	return unix.ENOSYS
}
