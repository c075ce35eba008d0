// Package emulatortest holds the test kit every provider emulator's tests
// share: serving a handler on a loopback port for the length of a test,
// the local provider as an emulator's backend, and the node projects that
// run the official SDKs' conformance scripts against an emulator.
//
// Only tests import it: it links testing and net/http/httptest, which the
// programs must not (every package a start links adds its initialisers and
// size to every start, and the program re-executes itself for each sandbox
// init and runner).
package emulatortest
