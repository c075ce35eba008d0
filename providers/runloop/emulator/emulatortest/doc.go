// Package emulatortest starts the Runloop emulator for one test (see
// Harness): the test kit of the runloop client's tests and of the
// emulator's own.
//
// Only tests import it: it links testing and net/http/httptest, which the
// programs serving the emulator must not.
package emulatortest
