// Command fanout starts many commands at once and reports how long each
// took: every command given runs concurrently in each round, and after all
// rounds it prints the number of failures and the p50, p99 and maximum of
// the latencies. It exits 1 when any command failed.
//
//	go run ./bench/fanout -rounds 5 -- 'sandbox --sandbox-id A exec -- true' 'sandbox --sandbox-id B exec -- true' …
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each runs every command concurrently")
	flag.Parse()
	cmds := flag.Args()
	if len(cmds) == 0 {
		fmt.Fprintln(os.Stderr, "usage: fanout [-rounds N] 'command' …")
		os.Exit(2)
	}
	var (
		mu    sync.Mutex
		lat   []time.Duration
		fails int
	)
	for range *rounds {
		var wg sync.WaitGroup
		for _, c := range cmds {
			wg.Go(func() {
				start := time.Now()
				cmd := exec.Command("/bin/sh", "-c", c)
				out, err := cmd.CombinedOutput()
				d := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, d)
				if err != nil {
					fails++
					fmt.Fprintf(os.Stderr, "fanout: %q: %v: %s\n", c, err, out)
				}
			})
		}
		wg.Wait()
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := min(int(p*float64(len(lat))), len(lat)-1)
		return float64(lat[i].Microseconds()) / 1000
	}
	fmt.Printf("%d commands (%d at once x %d rounds): %d failed; p50 %.1f ms  p99 %.1f ms  max %.1f ms\n",
		len(lat), len(cmds), *rounds, fails, q(0.50), q(0.99), q(1))
	if fails > 0 {
		os.Exit(1)
	}
}
