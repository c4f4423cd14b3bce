package shellsession

import "bytes"

// exitFilter drops the "exit" (or "logout") line an interactive bash writes
// to stderr when the exit builtin ends it: `bash -c` and a script do not
// write it, and it is an artifact of the shell's interactive mode, not of the
// command. The line is always the last thing the shell writes, so a stream
// that ends with it, with no end marker after, ends with bash's own.
type exitFilter struct {
	out  func([]byte)
	held []byte
}

var exitLines = [][]byte{[]byte("exit\n"), []byte("logout\n")}

func (f *exitFilter) write(p []byte) {
	if len(f.held) > 0 {
		f.out(f.held)
		f.held = nil
	}
	for _, l := range exitLines {
		if bytes.HasSuffix(p, l) {
			f.out(p[:len(p)-len(l)])
			f.held = append([]byte(nil), l...)
			return
		}
	}
	f.out(p)
}

// end is called when the stream ends: with marked true when the command's
// end marker came, so the shell did not exit and the held line is output.
func (f *exitFilter) end(marked bool) {
	if marked && len(f.held) > 0 {
		f.out(f.held)
	}
	f.held = nil
}
