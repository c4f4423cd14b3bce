package shellsession

import (
	"bytes"
	"os"
	"strings"
	"sync"
)

// diagReader drains the shell's own stdout and stderr — prompts, traces of
// the engine's lines, job messages — so that the shell never blocks on them,
// and keeps their last bytes to explain a shell that failed.
type diagReader struct {
	f *os.File

	mu     sync.Mutex // guards the fields below
	last   []byte
	want   []byte // the start marker of the command being started
	onWant func() // called, without mu, when want is seen
}

// expect arranges for fn to be called once marker appears on the shell's
// stdout. It replaces any earlier expectation.
func (d *diagReader) expect(marker []byte, fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want, d.onWant = marker, fn
}

const diagKeep = 2048

func newDiagReader(f *os.File) *diagReader { return &diagReader{f: f} }

func (d *diagReader) run() {
	defer d.f.Close()
	buf := make([]byte, 4096)
	for {
		n, err := d.f.Read(buf)
		if n > 0 {
			d.mu.Lock()
			prev := len(d.last)
			d.last = append(d.last, buf[:n]...)
			var fn func()
			if d.want != nil {
				// The marker may straddle two reads: look from just before
				// the new bytes.
				from := max(0, prev-len(d.want)+1)
				if bytes.Contains(d.last[from:], d.want) {
					fn, d.want, d.onWant = d.onWant, nil, nil
				}
			}
			if len(d.last) > diagKeep {
				d.last = append(d.last[:0], d.last[len(d.last)-diagKeep:]...)
			}
			d.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
		if err != nil {
			return
		}
	}
}

func (d *diagReader) tail() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.TrimSpace(string(d.last))
}
