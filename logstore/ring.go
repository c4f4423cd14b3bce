package logstore

import "unsafe"

// ring is a queue of frames, oldest first, in a power-of-two buffer that
// grows by doubling and shrinks when mostly empty, so that its memory follows
// the frames retained, from one to four slots a frame (minRing at least): a
// log's frame table, the bookkeeping that a Budget counts beside the bytes.
// Only the Log's owner of mu touches it.
type ring struct {
	buf  []Frame
	head int // index in buf of the oldest frame
	n    int // frames in the ring
}

const minRing = 8

func (r *ring) len() int { return r.n }

// slots returns the frames the buffer has room for: what it takes in
// memory, frameSize bytes each.
func (r *ring) slots() int { return len(r.buf) }

// frameSize is the bytes of a Frame, one slot of a ring.
const frameSize = int(unsafe.Sizeof(Frame{}))

// at returns the i-th oldest frame.
func (r *ring) at(i int) *Frame { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring) push(f Frame) {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = f
	r.n++
}

// pop removes the oldest frame and returns it.
func (r *ring) pop() Frame {
	f := &r.buf[r.head]
	out := *f
	*f = Frame{} // let its bytes go
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	// Small tables shrink too, so that a Budget that drops a log's frames
	// frees their slots. Halving at a quarter full, not at half, leaves
	// room to grow again before the next doubling: a log whose frames come
	// and go around one size does not copy its table back and forth.
	if len(r.buf) > minRing && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return out
}

// clear removes every frame.
func (r *ring) clear() { *r = ring{} }

func (r *ring) resize(size int) {
	buf := make([]Frame, size)
	r.copyOut(buf[:r.n], 0)
	r.buf, r.head = buf, 0
}

// copyOut copies the frames from the i-th oldest on into dst.
func (r *ring) copyOut(dst []Frame, i int) {
	if len(dst) == 0 {
		return
	}
	start := (r.head + i) & (len(r.buf) - 1)
	n := copy(dst, r.buf[start:])
	copy(dst[n:], r.buf)
}
