package logstore

import "time"

// The byte arena: frames smaller than bigFrame share chunks that start small
// (a log with a line of output stays small) and double up to maxChunk; larger
// frames get their own allocation, or a spare one (see maxSpare). A chunk given up for a frame that does
// not fit wastes less than bigFrame. No chunk is ever reused, since frames
// handed to readers keep pointing into it; Close moves the frames of a
// mostly empty last chunk into one of the right size.
//
// A small write on the channel of the newest frame, which no reader has
// seen yet and which began less than mergeWindow ago, extends that frame in
// place rather than making a new one (up to bigFrame bytes): a flood of tiny
// writes (a loop of echo) costs few frames, no cursor a reader holds ever
// changes meaning, and a frame's time stays within mergeWindow of each of
// its bytes.
const (
	minChunk    = 512
	maxChunk    = 64 << 10
	bigFrame    = 4 << 10
	mergeWindow = 10 * time.Millisecond
)

// maxSpare bounds the buffers of dropped frames a log keeps for reuse. A
// frame of bigFrame bytes or more that retention drops before any reader
// saw it cannot be referenced by anyone, so its buffer serves the next large
// frame of about its size: output flooding through a log reuses the
// retention's memory instead of leaving the garbage collector to double it.
const maxSpare = 8

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

// allocLocked returns a copy of j[off:end] in the arena. l.mu must be held.
func (l *Log) allocLocked(j joined, off, end int) []byte {
	n := end - off
	l.tail = nil
	if n >= bigFrame {
		if data := l.takeSpareLocked(n); data != nil {
			j.copyOut(data, off)
			return data
		}
		if off >= len(j.a) {
			// Append rather than make and copy: it does not zero the
			// memory first.
			// Its capacity is the allocation's whole size class: a
			// spare, it may serve a frame a little larger.
			return append([]byte(nil), j.b[off-len(j.a):end-len(j.a)]...)
		}
		data := make([]byte, n)
		j.copyOut(data, off)
		return data
	}
	if len(l.chunk) < n {
		l.chunkSize = max(n, min(maxChunk, max(minChunk, 2*l.chunkSize)))
		l.chunk = make([]byte, l.chunkSize)
		l.chunkFrom = l.last
	}
	data := l.chunk[:n:n]
	l.tail = l.chunk[:n]
	l.chunk = l.chunk[n:]
	j.copyOut(data, off)
	return data
}

// takeSpareLocked returns a spare buffer for n bytes, which wastes at most
// a quarter of them, or nil. l.mu must be held.
func (l *Log) takeSpareLocked(n int) []byte {
	for i, buf := range l.spare {
		if cap(buf) >= n && cap(buf)-n <= n/4 {
			last := len(l.spare) - 1
			l.spare[i], l.spare[last] = l.spare[last], nil
			l.spare = l.spare[:last]
			return buf[:n]
		}
	}
	return nil
}

// keepSpareLocked keeps buf, the bytes of a frame dropped unseen, for reuse;
// when the spares are full it takes the place of the oldest, so that the
// spares follow the sizes the output comes in now. l.mu must be held.
func (l *Log) keepSpareLocked(buf []byte) {
	if len(l.spare) < maxSpare {
		l.spare = append(l.spare, buf)
		return
	}
	copy(l.spare, l.spare[1:])
	l.spare[maxSpare-1] = buf
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
	in := func(f *Frame) bool { return f.Cursor >= l.chunkFrom && len(f.Data) < bigFrame }
	used := 0
	for i := from; i < l.frames.len(); i++ {
		if f := l.frames.at(i); in(f) {
			used += len(f.Data)
		}
	}
	buf := make([]byte, 0, used)
	for i := from; i < l.frames.len(); i++ {
		if f := l.frames.at(i); in(f) {
			buf = append(buf, f.Data...)
			f.Data = buf[len(buf)-len(f.Data) : len(buf) : len(buf)]
		}
	}
}
