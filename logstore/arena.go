package logstore

import "time"

// The byte arena: every frame's bytes live in chunks that start small (a log
// with a line of output stays small) and double up to maxChunk; a chunk
// given up for a small frame that does not fit wastes less than bigFrame,
// and a large write that does not fit is cut to fill the chunk's rest (see
// pieceLocked), so that a chunk of a flood is full. Close moves the frames of
// a mostly empty last chunk into one of the right size.
//
// A chunk of maxChunk bytes is a block. Once retention has dropped every
// frame of a block, no reader that may keep bytes was ever handed one of
// them, and no FollowLent is delivering one of them, nobody can refer to its
// bytes: it goes on a short free list and becomes the next block. Output
// flooding through a full log thus reuses the same blocks, of one size,
// rather than leaving the garbage collector buffers of every size (which
// lets the heap grow to about twice what is retained). A block that a
// keeping reader saw is left to the garbage collector, since the reader's
// frames keep pointing into it.
//
// A small write on the channel of the newest frame, which no reader has
// seen yet nor been handed the cursor of (by Bounds, or as the next of an
// empty page) and which began less than mergeWindow ago, extends that frame in
// place rather than making a new one (up to bigFrame bytes): a flood of tiny
// writes (a loop of echo) costs few frames, no cursor a reader holds ever
// changes meaning, and a frame's time stays within mergeWindow of each of
// its bytes.
const (
	minChunk    = 512
	maxChunk    = 64 << 10
	bigFrame    = 4 << 10
	minSplit    = 1 << 10
	maxFree     = 2
	mergeWindow = 10 * time.Millisecond
)

// block is a chunk of maxChunk bytes, with the cursors of the first and the
// last frame put in it.
type block struct {
	buf         []byte
	first, last Cursor
}

// mergeLocked appends j[off:end], arriving at t, to the newest frame when
// it is on ch, no reader has seen it, it began within mergeWindow, and the
// bytes fit in place after it in its chunk below bigFrame; it reports
// whether it did. l.mu must be held.
func (l *Log) mergeLocked(ch Channel, j joined, off, end int, t time.Time) bool {
	if l.tail == nil || l.frames.len() == 0 {
		return false
	}
	f := l.frames.at(l.frames.len() - 1)
	n, m := len(f.Data), end-off
	if f.Channel != ch || f.Cursor <= l.seen || t.Sub(f.Time) >= mergeWindow ||
		n+m >= bigFrame || n+m > l.frameMax || len(l.chunk) < m {
		return false
	}
	data := l.tail[: n+m : n+m]
	j.copyOut(data[n:], off)
	f.Data = data
	l.tail = l.tail[:n+m]
	l.chunk = l.chunk[m:]
	l.growLocked(m)
	l.trimLocked()
	return true
}

// pieceLocked returns the most bytes the next frame may take of a write
// with rest bytes left: frameMax, or for a large write that does not fit
// the current chunk the chunk's rest, unless that is too small to be worth
// a frame. l.mu must be held.
func (l *Log) pieceLocked(rest int) int {
	if room := len(l.chunk); rest > room && rest >= bigFrame && room >= minSplit {
		return min(room, l.frameMax)
	}
	return l.frameMax
}

// allocLocked returns a copy of j[off:end] in the arena, for the frame of
// cursor l.last. l.mu must be held.
func (l *Log) allocLocked(j joined, off, end int) []byte {
	n := end - off
	if len(l.chunk) < n {
		l.newChunkLocked(n)
	}
	data := l.chunk[:n:n]
	l.tail = l.chunk[:n]
	l.chunk = l.chunk[n:]
	j.copyOut(data, off)
	if k := len(l.blocks); k > 0 && l.blocks[k-1].first == l.chunkFrom {
		l.blocks[k-1].last = l.last
	}
	return data
}

// newChunkLocked starts a chunk for the frame of cursor l.last, of n bytes
// or more: a free block when it is a block. l.mu must be held.
func (l *Log) newChunkLocked(n int) {
	l.chunkSize = max(n, min(maxChunk, max(minChunk, 2*l.chunkSize)))
	l.chunkFrom = l.last
	if l.chunkSize != maxChunk {
		l.chunk = make([]byte, l.chunkSize)
		return
	}
	if k := len(l.free); k > 0 {
		l.chunk, l.free[k-1] = l.free[k-1], nil
		l.free = l.free[:k-1]
	} else {
		l.chunk = make([]byte, maxChunk)
	}
	l.blocks = append(l.blocks, block{buf: l.chunk, first: l.last, last: l.last})
}

// releaseBlocksLocked forgets the blocks, other than the current chunk,
// whose frames are all at or before cursor c, which retention has dropped;
// those no reader saw go on the free list while the log is open. l.mu must
// be held.
func (l *Log) releaseBlocksLocked(c Cursor) {
	k := 0
	for ; k < len(l.blocks); k++ {
		b := l.blocks[k]
		if b.last > c || b.first == l.chunkFrom && l.chunk != nil {
			break
		}
		if b.first > l.kept && !l.lentLocked(b) && !l.closed && len(l.free) < maxFree {
			l.free = append(l.free, b.buf[:maxChunk])
		}
		l.blocks[k] = block{}
	}
	if k > 0 {
		l.blocks = append(l.blocks[:0], l.blocks[k:]...)
	}
}

// lentLocked reports whether a FollowLent is delivering a frame of blk:
// one stuck on a frame holds that frame's block, not those that came after.
// l.mu must be held.
func (l *Log) lentLocked(blk block) bool {
	for _, b := range l.borrowers {
		if b.pin != 0 && b.pin <= blk.last && b.upTo >= blk.first {
			return true
		}
	}
	return false
}

// shrinkChunkLocked moves the frames in the current chunk to a chunk of
// their size when most of it is unused, since no more frames will come to
// fill it. The bytes do not change, only where they live: readers holding
// the old frames keep the old chunk. l.mu must be held.
func (l *Log) shrinkChunkLocked() {
	free := len(l.chunk)
	l.chunk, l.tail = nil, nil
	if free < minChunk || 2*free < l.chunkSize || l.frames.len() == 0 {
		return
	}
	first := l.frames.at(0).Cursor
	from := int(max(l.chunkFrom, first) - first)
	used := 0
	for i := from; i < l.frames.len(); i++ {
		used += len(l.frames.at(i).Data)
	}
	buf := make([]byte, 0, used)
	for i := from; i < l.frames.len(); i++ {
		f := l.frames.at(i)
		buf = append(buf, f.Data...)
		f.Data = buf[len(buf)-len(f.Data) : len(buf) : len(buf)]
	}
}
