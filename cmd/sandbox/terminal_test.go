//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStartAsksTheTerminalNothing runs the program on a terminal that
// answers nothing (as a pty that no emulator drives: script(1), an
// editor's shell, an agent's harness). Nothing may be written to the
// terminal before the program's own output: a query such as Lip Gloss's
// background-colour question (OSC 11, then a cursor report, CSI 6n) would
// wait for an answer that never comes, and on a terminal that does answer
// it costs a round trip and may swallow what the user types ahead.
func TestStartAsksTheTerminalNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, args := range [][]string{
		{"version"},
		{"list"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			c := newRunner(t, bin)
			master, slave := openTestPTY(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			base := c.command(args...)
			cmd := exec.CommandContext(ctx, base.Path, base.Args[1:]...)
			cmd.Dir, cmd.Env = base.Dir, append(base.Env, "TERM=xterm-256color", "COLORTERM=truecolor")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			// The terminal is the program's controlling one and its
			// process group the foreground, as in a shell.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			read := make(chan []byte)
			go func() { read <- readAll(master) }()
			err := cmd.Wait()
			// What the program wrote is in the terminal by now; a
			// process it left holding the terminal does not hold the test.
			_ = master.SetReadDeadline(time.Now().Add(time.Second))
			out := <-read
			if ctx.Err() != nil {
				t.Fatalf("%v did not end; it wrote %q", args, out)
			}
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			if bytes.Contains(out, []byte("\x1b]11;")) || bytes.Contains(out, []byte("\x1b[6n")) {
				t.Fatalf("%v queried the terminal: %q", args, out)
			}
			if len(bytes.TrimSpace(out)) == 0 {
				t.Fatalf("%v wrote nothing to the terminal", args)
			}
		})
	}
}

// openTestPTY opens a pseudo-terminal pair, closed when the test ends.
func openTestPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// readAll reads the master side until every slave is closed (EIO) or its
// read deadline passes.
func readAll(master *os.File) []byte {
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := master.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrDeadlineExceeded) {
				out.WriteString("\n[read: " + err.Error() + "]")
			}
			return out.Bytes()
		}
	}
}
