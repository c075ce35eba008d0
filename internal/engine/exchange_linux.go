package engine

import "golang.org/x/sys/unix"

// exchangeFiles swaps the files a and b in one step (RENAME_EXCHANGE).
func exchangeFiles(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
