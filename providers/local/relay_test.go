//go:build linux

package local

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRelayMadeAheadGrowsInUse: a relay a runner makes while it waits
// keeps its pipe at the default size (an idle runner's pipes count against
// the user's pipe allowance), grows it to relayBuf once in use, and, once
// finished, leaves /dev/null in its output's place, which it closed.
func TestRelayMadeAheadGrowsInUse(t *testing.T) {
	o, err := makeRelay()
	if err != nil {
		t.Fatal(err)
	}
	defer o.release()
	before, err := unix.FcntlInt(uintptr(o.w), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if before >= relayBuf {
		t.Fatalf("an unused relay's pipe holds %d bytes, want less than %d", before, relayBuf)
	}
	null, err := openHigh(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(null)
	var out [2]int
	if err := unix.Pipe2(out[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(out[0])
	o.use(out[1], null)
	if got, _ := unix.FcntlInt(uintptr(o.w), unix.F_GETPIPE_SZ, 0); got != relayBuf {
		t.Errorf("a relay in use has a pipe of %d bytes, want %d", got, relayBuf)
	}
	go o.forward()
	if _, err := unix.Write(o.w, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	o.closeWriter()
	o.finish()
	buf := make([]byte, 16)
	n, _ := unix.Read(out[0], buf)
	if string(buf[:n]) != "hello" {
		t.Errorf("relayed %q, want %q", buf[:n], "hello")
	}
	if n, err := unix.Read(out[0], buf); n != 0 || err != nil {
		t.Errorf("the output's reader got %d bytes, %v after the finish, want its end", n, err)
	}
	var st, nst unix.Stat_t
	if err := unix.Fstat(out[1], &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(null, &nst); err != nil {
		t.Fatal(err)
	}
	if st.Rdev != nst.Rdev || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("the output's place holds mode %o rdev %d, want /dev/null", st.Mode, st.Rdev)
	}
	unix.Close(out[1])
}

// TestRunnerPreparesRelays: a waiting runner makes its next command's two
// relays once and keeps them until a command takes them; a command that
// finds none gets a pair made at once.
func TestRunnerPreparesRelays(t *testing.T) {
	r := &runner{}
	r.prepare()
	made := r.outs
	if len(made) != 2 {
		t.Fatalf("prepare made %d relays, want 2", len(made))
	}
	r.prepare() // an operation that took none
	if len(r.outs) != 2 || r.outs[0] != made[0] || r.outs[1] != made[1] {
		t.Fatal("prepare made new relays while the last were unused")
	}
	got, err := r.relays()
	if err != nil || len(got) != 2 || got[0] != made[0] || got[1] != made[1] {
		t.Fatalf("relays gave %v, %v, want the prepared pair", got, err)
	}
	if r.outs != nil {
		t.Fatal("the runner still holds the relays it handed over")
	}
	fresh, err := r.relays()
	if err != nil || len(fresh) != 2 || fresh[0] == made[0] {
		t.Fatalf("with none prepared, relays gave %v, %v, want a new pair", fresh, err)
	}
	for _, o := range append(got, fresh...) {
		o.close()
	}
}
