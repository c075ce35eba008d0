//go:build linux

package modal_test

import (
	"errors"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// TestImageLookupAndDelete checks images through the official Go SDK: a
// built image is found by id, the same recipe gives the same image, a
// deleted one is not found and building it again gives a new id.
func TestImageLookupAndDelete(t *testing.T) {
	h := newHarness(t)
	ctx, c, app := h.sdkApp(t, "images", time.Minute)
	build := func() string {
		t.Helper()
		img, err := c.Images.FromRegistry("alpine:3.13", nil).Build(ctx, app, nil)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		return img.ImageID
	}
	notFound := func(id string) {
		t.Helper()
		var nf modalsdk.NotFoundError
		if _, err := c.Images.FromID(ctx, id, nil); !errors.As(err, &nf) {
			t.Errorf("Images.FromID(%s) error = %v (%T), want NotFoundError", id, err, err)
		}
	}
	first := build()
	if again := build(); again != first {
		t.Errorf("building the same recipe twice gave %s and %s", first, again)
	}
	if img, err := c.Images.FromID(ctx, first, nil); err != nil || img.ImageID != first {
		t.Fatalf("Images.FromID(%s) = %v, %v", first, img, err)
	}
	notFound("im-nonexistent")
	if err := c.Images.Delete(ctx, first, nil); err != nil {
		t.Fatalf("Images.Delete: %v", err)
	}
	notFound(first)
	if rebuilt := build(); rebuilt == first {
		t.Errorf("rebuilding a deleted image gave its old id %s", first)
	}
}
