package main

import (
	"fmt"
	"time"

	"github.com/conchsh/conch/client"
)

// gaps says where a followed log dropped output its reader fell behind on
// (retention): the first gap as the stream's warning says it, then at most
// a line a second counting the gaps since. A reader that stays behind a
// fast writer meets a gap every few frames: run and logs -f said each one,
// hundreds of lines a second.
type gaps struct {
	say     func(string)
	last    time.Time // when a line was said
	pending int       // gaps since that line
	from    string    // the cursor the latest of them goes on from
}

// note takes a warning of the stream's.
func (g *gaps) note(w *client.Warning) {
	now := time.Now()
	if g.last.IsZero() {
		g.last = now
		g.say(w.Message)
		return
	}
	g.pending++
	g.from = w.FirstAvailableCursor
	if now.Sub(g.last) >= time.Second {
		g.flush()
		g.last = now
	}
}

// flush says the gaps not said yet.
func (g *gaps) flush() {
	if g.pending == 0 {
		return
	}
	g.say(fmt.Sprintf("output was dropped by retention or the log budget %d more times as the reader fell behind; continuing from %s", g.pending, g.from))
	g.pending = 0
}
