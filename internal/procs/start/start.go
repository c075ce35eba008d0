// Package start starts the program on one processor (procs.One) in its
// initialiser; only main packages import it, first among their imports.
package start

import "github.com/agentbox/sandbox/internal/procs"

func init() { procs.One() }
