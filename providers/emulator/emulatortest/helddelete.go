package emulatortest

import (
	"context"
	"net/http"

	"github.com/agentbox/sandbox/providers"
)

// HeldDelete is a backend whose Delete, once begun, waits until Release
// is closed: Entered is closed when it begins. A test makes an emulator
// answer requests while one of its sandboxes is being deleted.
type HeldDelete struct {
	providers.Provider
	Entered, Release chan struct{}
}

// NewHeldDelete wraps p; its first Delete is held.
func NewHeldDelete(p providers.Provider) *HeldDelete {
	return &HeldDelete{Provider: p, Entered: make(chan struct{}), Release: make(chan struct{})}
}

// Delete waits for Release, then deletes.
func (b *HeldDelete) Delete(ctx context.Context, id string) error {
	close(b.Entered)
	<-b.Release
	return b.Provider.Delete(ctx, id)
}

// StatusOf sends req in the background and delivers its status (0 when
// it could not be sent).
func StatusOf(req *http.Request) <-chan int {
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	return status
}
