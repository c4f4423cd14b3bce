// Package buftest has a buffer a test reads while something else writes to
// it: a daemon's log, a child's stderr.
package buftest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for one writer and readers at once. The
// zero value is empty and ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
