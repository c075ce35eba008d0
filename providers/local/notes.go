//go:build linux

package local

import (
	"strconv"
	"strings"
	"sync"
)

// landlockScopeABI is the first Landlock ABI that scopes abstract Unix
// sockets: below it, a command in the host's network (--network on) can
// reach the host's abstract sockets.
const landlockScopeABI = 6

// landlockNote is what a command run in the host's network should be told
// about the Landlock ABI its sandbox enforced; "" when nothing.
func landlockNote(abi int) string {
	if abi >= landlockScopeABI {
		return ""
	}
	have := "no Landlock"
	if abi > 0 {
		have = "Landlock ABI " + strconv.Itoa(abi)
	}
	return "with --network on, commands can reach the host's abstract Unix sockets: this kernel has " + have +
		", and scoping them needs ABI " + strconv.Itoa(landlockScopeABI) + " (Linux 6.12)"
}

// notes are remarks for TakeNote, each said once per sandbox.
type notes struct {
	mu sync.Mutex
	// pending holds the notes not yet taken; said the ones given once,
	// which are not repeated.
	pending, said map[string][]string
}

// add records note for sandbox id unless it was already said.
func (n *notes) add(id, note string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending == nil {
		n.pending, n.said = map[string][]string{}, map[string][]string{}
	}
	for _, s := range append(n.said[id], n.pending[id]...) {
		if s == note {
			return
		}
	}
	n.pending[id] = append(n.pending[id], note)
}

// take returns the pending notes of id, joined, and marks them said.
func (n *notes) take(id string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pending[id]
	if len(p) == 0 {
		return ""
	}
	delete(n.pending, id)
	n.said[id] = append(n.said[id], p...)
	return strings.Join(p, "; ")
}
