package emulator

import "strings"

// CountMatching returns how many requests whose method and path satisfy
// match reached the layer, for paths holding ids the test does not know
// (an execution's, say).
func (f *Faults) CountMatching(match func(method, path string) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for key, c := range f.counts {
		if method, path, ok := strings.Cut(key, " "); ok && match(method, path) {
			n += c
		}
	}
	return n
}
