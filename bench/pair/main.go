// Command pair times two or more commands side by side: it runs them in
// alternation (A B A B …) so machine noise hits each alike, then prints each
// command's median wall time and the ratio of every median to the last
// command's (the reference), and the median CPU time the command and the
// processes it waited for used (user and system; what a machine a command
// talks to spends is not in it): on a shared host it is the steadier measure
// for comparing two builds of one program.
//
//	go run ./bench/pair -n 40 -- 'sandbox --sandbox-id ID exec -- true' 'bwrap … true'
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 30, "timed runs of each command")
	warm := flag.Int("warmup", 3, "untimed runs of each command first")
	gap := flag.Duration("gap", 0, "pause before each run, so that work a command left running in the background (a sandbox's machine preparing its next runner) does not land on the next command's time")
	before := flag.String("before", "", "shell `COMMAND` run, untimed, before each run of the first command (e.g. stopping the sandbox it starts)")
	flag.Parse()
	cmds := flag.Args()
	if len(cmds) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pair [-n N] [-warmup W] [-gap D] [-before CMD] 'command A' 'reference command'")
		os.Exit(2)
	}
	times := make([][]time.Duration, len(cmds))
	cpu := make([][]time.Duration, len(cmds))
	for i := 0; i < *warm+*n; i++ {
		for j, c := range cmds {
			if j == 0 && *before != "" {
				mustRun(*before)
			}
			time.Sleep(*gap)
			start := time.Now()
			st := mustRun(c)
			if i >= *warm {
				times[j] = append(times[j], time.Since(start))
				cpu[j] = append(cpu[j], st.UserTime()+st.SystemTime())
			}
		}
	}
	ref := median(times[len(cmds)-1])
	for j, c := range cmds {
		m := median(times[j])
		fmt.Printf("median %8.2f ms  ratio %5.2fx  cpu %6.2f ms  %s\n", float64(m.Microseconds())/1000, float64(m)/float64(ref), float64(median(cpu[j]).Microseconds())/1000, c)
	}
}

// mustRun runs a shell command, its output on stderr, and exits on failure.
func mustRun(c string) *os.ProcessState {
	cmd := exec.Command("/bin/sh", "-c", c)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "pair: %q failed: %v\n", c, err)
		os.Exit(1)
	}
	return cmd.ProcessState
}

// median is the middle of d.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
