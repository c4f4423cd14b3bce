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
	case 'K': // erase in line: 0 to its end, 1 to its start (its row's), 2 all of it
		switch n {
		case 0:
			r.cells = r.cells[:min(r.col, len(r.cells))]
		case 1:
			r.erase(r.rowStart(), r.col+1)
		case 2:
			r.cells = r.cells[:0]
		}
	case 'X': // erase n cells
		r.erase(r.col, r.col+max(n, 1))
	case 'P': // delete n cells, the rest of the row moves left
		r.delete(max(n, 1))
	case '@': // insert n blank cells, the rest of the row moves right
		r.insert(max(n, 1))
	}
}

// A line longer than width is taken as a terminal shows it, in rows of
// width cells: a row is what inserting, deleting and erasing to the line's
// start move or blank, as on a screen, where they stop at its edges. They
// moved the whole rest of the line: a program that inserted at the start
// of a long line over and over cost time quadratic in its output (680 KB
// took 45 s to render).
func (r *Renderer) rowStart() int { return r.col - r.col%width }
func (r *Renderer) rowEnd() int   { return r.rowStart() + width }

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

// insert moves the cells of the cursor's row from the cursor on n to the
// right, blanking the cells it opens; cells pushed past the row's end are
// lost, as past a screen's right edge.
func (r *Renderer) insert(n int) {
	if r.col >= len(r.cells) {
		return
	}
	end := r.rowEnd()
	if len(r.cells) < end { // the line's last row grows
		end = min(len(r.cells)+n, end)
		for len(r.cells) < end {
			r.cells = append(r.cells, blank)
		}
	}
	shift := min(n, end-r.col)
	copy(r.cells[r.col+shift:end], r.cells[r.col:end-shift])
	r.erase(r.col, r.col+shift)
}

// delete removes n cells of the cursor's row at the cursor: the rest of
// the row moves left, and blanks fill its end (the line's last row only
// gets shorter).
func (r *Renderer) delete(n int) {
	if r.col >= len(r.cells) {
		return
	}
	end := min(r.rowEnd(), len(r.cells))
	k := min(n, end-r.col)
	if end == len(r.cells) {
		r.cells = append(r.cells[:r.col], r.cells[r.col+k:]...)
		return
	}
	copy(r.cells[r.col:end-k], r.cells[r.col+k:end])
	r.erase(end-k, end)
}
