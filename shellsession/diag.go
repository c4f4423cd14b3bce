package shellsession

import (
	"os"
	"strings"
	"sync"
)

// diagReader drains the shell's own stdout and stderr — prompts, traces of
// the engine's lines, job messages — so that the shell never blocks on them,
// and keeps their last bytes to explain a shell that failed.
type diagReader struct {
	f    *os.File
	mu   sync.Mutex // guards last
	last []byte
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
			d.last = append(d.last, buf[:n]...)
			if len(d.last) > diagKeep {
				d.last = append(d.last[:0], d.last[len(d.last)-diagKeep:]...)
			}
			d.mu.Unlock()
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
