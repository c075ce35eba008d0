package cli

import (
	"github.com/agentbox/sandbox/internal/output"

	"fmt"
	"io"
	"time"
)

// progressLine shows transfer progress on a terminal's stderr, one line
// rewritten in place; without a terminal it prints only a final summary.
type progressLine struct {
	w     io.Writer
	tty   bool
	verb  string
	start time.Time
	moved int64
}

func (a *App) progress(verb string) *progressLine {
	return &progressLine{w: a.streams.Err, tty: a.streams.ErrTTY && !a.flags.json, verb: verb, start: time.Now()}
}

func (p *progressLine) update(done, total int64) {
	p.moved = done
	if !p.tty {
		return
	}
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	line := fmt.Sprintf("%s %s", p.verb, output.Bytes(done))
	if total > 0 {
		line += " / " + output.Bytes(total)
		if rate > 0 && done < total {
			line += fmt.Sprintf(", %s left", (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second))
		}
	}
	line += fmt.Sprintf(" (%s/s)", output.Bytes(int64(rate)))
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

func (p *progressLine) done(err error) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	if err == nil {
		fmt.Fprintf(p.w, "%sed %s in %s\n", p.verb, output.Bytes(p.moved), time.Since(p.start).Round(time.Millisecond))
	}
}
