package plaintext

// apply carries out the CSI sequence with the given final byte and the
// parameters read, when it acts within the current line; every other CSI
// (colours, modes, moves between lines, private sequences) is dropped.
func (r *Renderer) apply(final byte) {
	n, ok := r.firstParam()
	if !ok {
		return
	}
	switch final {
	case 'C': // cursor forward
		r.col = min(r.col+max(n, 1), r.limit())
	case 'D': // cursor back
		r.col = max(r.col-max(n, 1), 0)
	case 'G', '`': // cursor to column n
		r.col = min(max(n, 1)-1, r.limit())
	case 'K': // erase in line: 0 to its end, 1 to its start, 2 all of it
		switch n {
		case 0:
			r.cells = r.cells[:min(r.col, len(r.cells))]
		case 1:
			r.erase(0, r.col+1)
		case 2:
			r.cells = r.cells[:0]
		}
	case 'X': // erase n cells
		r.erase(r.col, r.col+max(n, 1))
	case 'P': // delete n cells, the rest of the line moves left
		if r.col < len(r.cells) {
			k := min(max(n, 1), len(r.cells)-r.col)
			r.cells = append(r.cells[:r.col], r.cells[r.col+k:]...)
		}
	case '@': // insert n blank cells, the rest of the line moves right
		r.insert(max(n, 1))
	}
}

// firstParam returns the first numeric parameter of the CSI read, 0 when it
// has none, and false for a private or intermediate sequence, which is none
// of those apply knows.
func (r *Renderer) firstParam() (int, bool) {
	n := 0
	first := true
	for _, c := range r.params {
		switch {
		case c >= '0' && c <= '9':
			if first {
				n = min(n*10+int(c-'0'), width)
			}
		case c == ';' || c == ':':
			first = false
		default: // < = > ? or an intermediate byte
			return 0, false
		}
	}
	return n, true
}

// limit is the column cursor movements stop at; see width.
func (r *Renderer) limit() int { return max(len(r.cells), width) }

// erase blanks the cells from..to-1 that the line holds.
func (r *Renderer) erase(from, to int) {
	for i := from; i < min(to, len(r.cells)); i++ {
		r.cells[i] = blank
	}
}

// insert moves the cells from the cursor on n to the right, blanking the
// cells it opens; cells pushed past the limit are lost, as past a screen's
// right edge.
func (r *Renderer) insert(n int) {
	if r.col >= len(r.cells) {
		return
	}
	end := min(len(r.cells)+n, r.limit())
	for len(r.cells) < end {
		r.cells = append(r.cells, blank)
	}
	shift := min(n, end-r.col)
	copy(r.cells[r.col+shift:], r.cells[r.col:end-shift])
	r.erase(r.col, r.col+shift)
}
