package logstore

import "unicode/utf8"

// joined is the concatenation of a channel's held-back bytes and a write,
// read without copying them together first.
type joined struct{ a, b []byte }

func (j joined) len() int { return len(j.a) + len(j.b) }

func (j joined) at(i int) byte {
	if i < len(j.a) {
		return j.a[i]
	}
	return j.b[i-len(j.a)]
}

// copyOut copies the bytes from off on into dst.
func (j joined) copyOut(dst []byte, off int) {
	if off < len(j.a) {
		n := copy(dst, j.a[off:])
		dst, off = dst[n:], len(j.a)
	}
	copy(dst, j.b[off-len(j.a):])
}

// tail copies the last bytes of j, at most len(buf), into buf.
func (j joined) tail(buf []byte) []byte {
	n := min(len(buf), j.len())
	j.copyOut(buf[:n], j.len()-n)
	return buf[:n]
}

// cutBefore returns where a frame that starts at off and may hold at most n
// bytes ends (off+n < j.len()), so that no valid UTF-8 sequence is split: at
// the last sequence start in the four bytes up to and including off+n. Four
// continuation bytes in a row belong to no valid sequence, so when there is no
// start among them (binary data) the cut is off+n itself.
func (j joined) cutBefore(off, n int) int {
	end := off + n
	for i := end; i > off && i > end-utf8.UTFMax; i-- {
		if utf8.RuneStart(j.at(i)) {
			return i
		}
	}
	return end
}
