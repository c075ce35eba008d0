package emulator

import (
	"context"
	"time"
)

// Every calls f every interval until ctx ends: an emulator's reaper of
// expired or idle sandboxes.
func Every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
