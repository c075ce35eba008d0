// Package procs starts the program on one processor (GOMAXPROCS=1) and
// gives the runtime's default back to the work that wants more.
//
// Most runs of this program are short and serial: a CLI call that reads a
// few files, asks a sandbox's machine for one operation and exits, or a
// sandbox's init or runner starting. With the default (one P per CPU), each
// goroutine the runtime or a package initialiser starts wakes a second
// thread to look for work, and threads are made, parked and woken for
// nothing: on a two-CPU host that is about a tenth of a cold `sandbox exec`
// (bench/run.sh exec). Package start, which the programs' main packages
// import, calls One in its initialiser, which runs before those of the
// dependencies that start goroutines or allocate much (its import path
// sorts before theirs, and it depends on nothing they do); commands that
// serve or copy in parallel call Default. Tests, whose binaries do not
// import start, keep the runtime's default.
//
// A GOMAXPROCS in the environment is left as it is, in One and in Default.
// The programs are built with the runtime's own updates of GOMAXPROCS off
// (updatemaxprocs=0 in their main packages): Default takes the default
// once, when called.
package procs

import (
	"runtime"
	"syscall"
)

// One sets GOMAXPROCS to 1, unless the environment set it.
func One() {
	if !userSet() {
		runtime.GOMAXPROCS(1)
	}
}

// userSet reports whether the environment sets GOMAXPROCS.
func userSet() bool {
	_, ok := syscall.Getenv("GOMAXPROCS")
	return ok
}

// Default gives the program the runtime's default GOMAXPROCS (the CPUs it
// may use, and the runtime's updates of it when they change), unless the
// environment set one.
func Default() {
	if !userSet() {
		runtime.SetDefaultGOMAXPROCS()
	}
}
