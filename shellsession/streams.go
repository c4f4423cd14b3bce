package shellsession

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/sentinel"
)

// streams are the FIFOs of one command: its stdout and stderr, which the
// engine reads, and, when open, its stdin.
//
// A background job may keep a command's stream open after the command, so a
// stream goes back to the session's pool for a later command only once it is
// known clean: every writer closed it (the reader saw end-of-file after the
// end marker). A stream a job still holds is read and discarded until the
// job lets go, and never reused, so the job can never write into a later
// command's output.
type streams struct {
	out, err *stream
	stdin    string // FIFO path, or "" for /dev/null
}

// stream is one output FIFO (see resident.Stream): the shell opens and
// closes it once for the command and once for its end line.
type stream = resident.Stream

// poolSize is how many clean streams a session keeps ready: two commands'
// worth, so that one command's streams are being checked for end-of-file
// while the next command uses the other pair.
const poolSize = 4

// newStream makes and opens a FIFO in the session's directory.
func (s *Session) newStream() (*stream, error) {
	if _, err := s.makeDir(); err != nil { // a command may have removed it
		return nil, err
	}
	s.mu.Lock()
	s.seq++
	path := filepath.Join(s.fifoDir, strconv.Itoa(s.seq))
	s.mu.Unlock()
	st, err := resident.MakeStream(path)
	if errors.Is(err, fs.ErrExist) { // a command put something there
		os.Remove(path)
		st, err = resident.MakeStream(path)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.live++
	s.mu.Unlock()
	return st, nil
}

// makeDir makes the session's directory anew, if a command removed it or
// put something else in its place (see resident.Dir.Remake). It reports
// whether the directory moved: made under a new name, since what is at the
// old one is no longer the engine's (another user's directory may be there
// now, or at its base's name). The session then forgets every file it kept
// there, and frames the next command with the new paths; the caller, on
// the queue's goroutine, must not use the old ones it holds.
func (s *Session) makeDir() (moved bool, err error) {
	dir, moved, err := s.dir.Remake()
	if !moved {
		return false, err
	}
	s.fifoDir, s.scriptName = dir, filepath.Join(dir, "cmd")
	s.script.Close()
	s.frame.Close()
	s.status.Close()
	s.endFile = "" // not removed: the name may be another user's file now
	s.mu.Lock()
	pool := s.pool
	s.pool = nil
	s.mu.Unlock()
	for _, st := range pool {
		st.InPlace() // false, unless it was moved too: its path is left alone then
		s.discard(st)
	}
	return true, nil
}

// errDirMoved fails a command framed with the paths of a directory that
// makeDir then moved: the frame would name files that are not the
// engine's. The next command is framed with the new paths.
var errDirMoved = errors.New("the session's directory was removed and another put in its place, so it was made anew under a new name; run the command again")

// discard closes a stream of the session for good.
func (s *Session) discard(st *stream) {
	st.Close()
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
}

// release gives back streams no command used.
func (s *Session) release(st *streams) {
	if st == nil {
		return
	}
	s.putStream(st.out)
	s.putStream(st.err)
	if st.stdin != "" {
		os.Remove(st.stdin)
	}
}

// takeStream returns a clean stream from the pool, or a new one. A pooled
// stream whose FIFO a command removed or moved (rm -rf of the session's
// directory, say with all of /dev/shm, or mv) is closed rather than used:
// the shell could not open it by its name, or would make a plain file
// there.
func (s *Session) takeStream() (*stream, error) {
	for {
		s.mu.Lock()
		n := len(s.pool)
		if n == 0 {
			s.mu.Unlock()
			return s.newStream()
		}
		st := s.pool[n-1]
		s.pool = s.pool[:n-1]
		s.mu.Unlock()
		if st.InPlace() {
			return st, nil
		}
		s.discard(st)
	}
}

// putStream returns a clean stream to the pool, or closes it when the pool
// is full or the session ends.
func (s *Session) putStream(st *stream) {
	s.mu.Lock()
	s.poolLocked(st)
}

// poolLocked puts st in the pool, or discards it when the pool is full or
// the session ends, and lets go of s.mu, which the caller holds.
func (s *Session) poolLocked(st *stream) {
	if len(s.pool) < poolSize && !s.h.Closing() {
		s.pool = append(s.pool, st)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.discard(st)
}

// takeStreams fills st, a command's own, with its streams, and its stdin
// FIFO when its stdin is open, and returns it; or nil.
func (s *Session) takeStreams(st *streams, stdinOpen bool) (*streams, error) {
	*st = streams{}
	s.takeLateOut()
	var err error
	if st.out, err = s.takeStream(); err != nil {
		return nil, err
	}
	if st.err, err = s.takeStream(); err != nil {
		s.putStream(st.out)
		*st = streams{}
		return nil, err
	}
	if stdinOpen {
		s.mu.Lock()
		s.seq++
		path := filepath.Join(s.fifoDir, strconv.Itoa(s.seq)+".i")
		s.mu.Unlock()
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			s.release(st)
			*st = streams{}
			return nil, &os.PathError{Op: "mkfifo", Path: path, Err: err}
		}
		st.stdin = path
	}
	return st, nil
}

// takeLateOut makes sure the command about to take its streams reads the
// stream whose late end line may still come (see Session.lateOut): the
// shell writes that line before the command runs, and a stream nobody reads
// holds only a pipe's worth of it (64 KiB on Linux). An end line longer
// than that (its directory passes sentinel.MaxCwd) into a stream left in
// the pool blocked the shell for good, and with it every later command.
// The stream goes on top of the pool when it is there; otherwise a reader
// of held streams has it, and it is not put back in the pool once its
// writers let go (see streamReader.end): it may be opened again then, with
// nobody to read.
func (s *Session) takeLateOut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lateOut == nil || s.lateMissed {
		return
	}
	n := len(s.pool)
	for i, st := range s.pool {
		if st == s.lateOut {
			if i < n-2 { // the command takes the two on top
				s.pool[i], s.pool[n-1] = s.pool[n-1], st
			}
			return
		}
	}
	s.lateMissed = true
}

// markedOut records that the command whose stdout is st ended by its end
// marker: the shell has run the end lines of the commands before, and st
// is the stream a late end line may still come to (see Session.lateOut).
func (s *Session) markedOut(st *stream) {
	s.mu.Lock()
	s.lateOut, s.lateMissed = st, false
	s.mu.Unlock()
}

// repool puts the stream of r, whose writers let go of it, back in the
// pool, r done with it, as putStream does, and reports whether it did: not
// the stream a late end line may still come to once a command took its
// streams without it (see takeLateOut), which the caller discards as it
// would a stream a writer may open again (see streamReader.writerCame).
func (s *Session) repool(r *streamReader) bool {
	st := r.st
	s.mu.Lock()
	// Checked and pooled under one hold of s.mu: a command that took its
	// streams in between would have missed it.
	if st == s.lateOut && s.lateMissed {
		s.mu.Unlock()
		return false
	}
	r.done() // before another command can take the stream
	s.poolLocked(st)
	return true
}

// fillPool makes streams until the session has two commands' worth, in the
// pool or in use and soon back, while the caller of the last command reads
// its result, off the next command's path.
func (s *Session) fillPool() {
	for {
		s.mu.Lock()
		enough := s.live >= poolSize || len(s.pool) >= 2 || s.h.Closing()
		s.mu.Unlock()
		if enough {
			return
		}
		st, err := s.newStream()
		if err != nil {
			return // the next command makes them, and reports why if it cannot
		}
		s.putStream(st)
	}
}

// closePool closes the streams in the pool, and the spare epoll sets.
func (s *Session) closePool() {
	s.mu.Lock()
	pool, eps := s.pool, s.epolls
	s.pool, s.epolls = nil, nil
	s.mu.Unlock()
	for _, st := range pool {
		s.discard(st)
	}
	for _, ep := range eps {
		ep.close()
	}
}

// writeScript puts a command's text in the session's script file, which the
// shell sources, after f's head when guard is set: the words that set its
// guard and $? (see guardsInScript), and ends it (see scriptEnd). One file
// serves every command: the next command's text replaces it only after the
// shell is done with the last one. The text is copied into room the
// session keeps, written with one call.
func (s *Session) writeScript(f sentinel.Frame, guard bool, text string) error {
	b := s.scriptBuf[:0]
	if guard {
		b = f.AppendHead(b)
	}
	b = append(b, text...)
	b = append(b, scriptEnd(text)...)
	err := s.rewrite(&s.script, s.scriptName, b)
	if cap(b) <= maxScriptBuf {
		s.scriptBuf = b[:0]
	} else {
		s.scriptBuf = nil // a long text's room is not kept
	}
	return err
}

// maxScriptBuf bounds the room a session keeps for its script's text.
const maxScriptBuf = 64 << 10

// rewrite replaces the text of the file at path, kept open in f (the
// session's directory is in memory where the host has /dev/shm). A file a
// command removed or moved (with the directory, say) is made anew, as is
// one whose write failed.
func (s *Session) rewrite(f *rawcall.File, path string, text []byte) error {
	size, ok := f.InPlace()
	if f.IsOpen() && !ok {
		f.Close()
	}
	if !f.IsOpen() {
		size = 0
		if moved, err := s.makeDir(); err != nil {
			return err
		} else if moved {
			return errDirMoved
		}
		// Whatever a command put in the file's place goes: a symbolic
		// link is never followed.
		rawcall.Unlink(path)
		nf, err := rawcall.OpenFile(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return &fs.PathError{Op: "open", Path: path, Err: err}
		}
		*f = nf
	}
	err := f.WriteAt(text, 0)
	if err == nil && size > int64(len(text)) {
		// Only a file that held more is cut: the same-size ftruncate
		// cost 1.3 µs on tmpfs, as much as the write.
		err = f.Truncate(int64(len(text)))
	}
	if err != nil {
		f.Close()
	}
	return err
}

// newFrame frames a command with paths p after one that exited with prev,
// as this session's shell runs it: with its markers for the engine on its
// stderr when its stdout is closed, by path when its stderr is closed too
// (see closeOwn), and the frame and end line in files for a shell sent
// short lines that run them from there (see framesFromFiles), which it
// writes.
func (s *Session) newFrame(prev int, p sentinel.Paths) (sentinel.Frame, error) {
	p.OwnStderr = closesStdout(s.sh) && !s.ownOnly
	p.OwnPath = s.own
	if p.OwnPath == "" {
		p.OwnElse = s.h.OwnPath() // should the shell lose its own streams
	}
	if framing != nil {
		// On a copy: a p whose address is taken moves to the heap, an
		// allocation at every command, the hook set or not.
		q := p
		framing(&q)
		p = q
	}
	if prev != 0 && prev != 1 {
		f, err := s.statusFramed(prev, p)
		if err == nil || errors.Is(err, errDirMoved) {
			return f, err
		}
		// The file cannot be written (the file system is full, say): a
		// subshell gives $? its status, as it may still fork.
	}
	return s.frameFor(prev, p)
}

// statusFramed frames a command after one that exited with prev, neither 0
// nor 1, giving $? that status by the session's status file, which it
// writes (see sentinel.Paths.StatusFile).
func (s *Session) statusFramed(prev int, p sentinel.Paths) (sentinel.Frame, error) {
	p.StatusFile = filepath.Join(s.fifoDir, "status")
	f, err := s.frameFor(prev, p)
	if err == nil {
		err = s.rewrite(&s.status, p.StatusFile, []byte(f.StatusText))
	}
	return f, err
}

// frameFor frames a command with paths p after one that exited with prev.
func (s *Session) frameFor(prev int, p sentinel.Paths) (sentinel.Frame, error) {
	frame, end := framesFromFiles(s.sh)
	if !end {
		if !sentinel.Templated(p) || prev != 0 && prev != 1 {
			return sentinel.New(prev, p), nil
		}
		// The same few streams serve command after command: their frame's
		// text is built once.
		k := frameKey{prev: prev, stdin: p.Stdin, stdout: p.Stdout, stderr: p.Stderr, script: p.Script,
			before: p.Before, run: p.Run, announce: p.Announce, ownStderr: p.OwnStderr, ownPath: p.OwnPath, guardInScript: p.GuardInScript}
		t, ok := s.templates[k]
		if !ok {
			if len(s.templates) >= maxTemplates || s.templates == nil {
				s.templates = make(map[frameKey]sentinel.Template) // streams discarded, new ones made
			}
			t = sentinel.NewTemplate(prev, p)
			s.templates[k] = t
		}
		return t.Frame(), nil
	}
	// One frame file serves every command, as the script file does; an end
	// file is the command's own.
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	p.EndFile = filepath.Join(s.fifoDir, "e"+strconv.Itoa(seq))
	if frame {
		p.FrameFile = filepath.Join(s.fifoDir, "f")
	}
	f := sentinel.New(prev, p)
	if err := s.writeFrame(p, f); errors.Is(err, errDirMoved) {
		return f, err
	} else if err != nil {
		// The files cannot be written (their file system is full, say):
		// the lines carry the frame and the end line themselves, long as
		// they are, so that the command still runs — the one that frees
		// the space, perhaps.
		p.EndFile, p.FrameFile = "", ""
		return sentinel.New(prev, p), nil
	}
	return f, nil
}

// framing, when a test sets it, may change the paths of each frame.
var framing func(*sentinel.Paths)

// frameKey is what tells a session's frame templates apart: the previous
// status (0 or 1; others are framed anew) and the paths that vary from one
// command to the next (a session's calls are its shell's).
type frameKey struct {
	prev                          int
	stdin, stdout, stderr, script string
	before                        string
	run                           sentinel.Run
	announce, ownStderr           bool
	ownPath                       string // OwnElse follows from it (see newFrame)
	guardInScript                 bool
}

// maxTemplates bounds a session's frame templates: its pool's streams
// (see poolSize) in their pairings, both previous statuses, traced or not,
// the guard in the script or not.
const maxTemplates = 64

// writeFrame writes the files f runs from, and removes the last command's
// end file: an end line of that command sent again, should it run late,
// finds none and writes nothing.
func (s *Session) writeFrame(p sentinel.Paths, f sentinel.Frame) error {
	if s.endFile != "" {
		rawcall.Unlink(s.endFile)
		s.endFile = ""
	}
	err := rawcall.CreateFile(p.EndFile, []byte(f.EndText), 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// A command removed the session's directory, and with it the frame
		// file kept open: make both anew.
		s.frame.Close()
		var moved bool
		if moved, err = s.makeDir(); moved {
			return errDirMoved
		} else if err == nil {
			err = rawcall.CreateFile(p.EndFile, []byte(f.EndText), 0o600)
		}
	}
	if err != nil {
		err = &fs.PathError{Op: "write", Path: p.EndFile, Err: err}
	}
	if err != nil {
		return err
	}
	s.endFile = p.EndFile
	if p.FrameFile != "" {
		return s.rewrite(&s.frame, p.FrameFile, []byte(f.FrameText))
	}
	return nil
}
