//go:build linux

package local

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	MaybeRunInit()
	os.Exit(m.Run())
}
