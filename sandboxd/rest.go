package sandboxd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/rawpath"
)

// The REST API: files under the root, health and metadata.

// Error codes of the REST API's error bodies, as upstream names them.
const (
	codeNotFound         = "NOT_FOUND"
	codePermissionDenied = "PERMISSION_DENIED"
	codeConflict         = "CONFLICT"
	codeInvalidArgument  = "INVALID_ARGUMENT"
	codeUnavailable      = "UNAVAILABLE"
	codeInternal         = "INTERNAL"
	// codeFailedPrecondition is a conditional request's precondition
	// that failed (If-Unmodified-Since, If-Match).
	codeFailedPrecondition = "FAILED_PRECONDITION"
	// codeResourceExhausted is a write the file system had no room for
	// (ENOSPC, EDQUOT): 507, as the gRPC surface answers a start short of
	// the same room RESOURCE_EXHAUSTED.
	codeResourceExhausted = "RESOURCE_EXHAUSTED"
)

// APIError is the body of every REST answer that is not 2xx.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// FileEntry is one entry of a DirectoryListing.
type FileEntry struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Type       string `json:"type"`        // see entryType
	ModifiedAt string `json:"modified_at"` // RFC 3339, UTC
	Mode       string `json:"mode"`        // permission bits in octal: "0644"
}

// DirectoryListing is GET /v1/files/{path}'s answer for a directory.
type DirectoryListing struct {
	Path    string      `json:"path"`
	Entries []FileEntry `json:"entries"`
}

// HealthResponse is GET /v1/health's answer while the daemon serves.
type HealthResponse struct {
	Status        string `json:"status"`
	UptimeSeconds int64  `json:"uptime_seconds"`
}

// MetadataResponse is GET /v1/metadata's answer.
type MetadataResponse struct {
	Env map[string]string `json:"env"`
}

// modePattern is what PUT's mode must match: permission bits in octal,
// without setuid, setgid or sticky bits.
var modePattern = regexp.MustCompile(`^0[0-7]{3}$`)

// defaultFileMode is the mode of a file PUT without one.
const defaultFileMode = 0o644

// Handler returns the REST API as an http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// checkHost passes to h the requests whose Host header allowed takes, and
// answers the others 403.
func checkHost(allowed func(hostport string) bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(r.Host) {
			writeError(w, http.StatusForbidden, codePermissionDenied,
				"host %q is not allowed: a server on loopback answers localhost, loopback addresses and the hosts allowed (--allow-host)", r.Host)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// routes dispatches the REST API's requests by path and method. Not
// http.ServeMux: it answers a path that is not clean (//tmp/f, a/../b)
// with a redirect to a cleaned one, which for a file's path can name
// another file (the root's own absolute path names what it says, the same
// path without its leading slash is relative to the root), and its 404 and
// 405 are plain text where every error of this API is JSON. A file's path
// is cleaned by the file routes themselves (see lexical). A GET route
// serves HEAD too, with the body left out.
func (s *Server) routes() http.Handler {
	type route struct {
		methods string // the methods taken, as an Allow header says them
		serve   map[string]http.HandlerFunc
	}
	files := route{"GET, HEAD, PUT, DELETE", map[string]http.HandlerFunc{
		http.MethodGet: s.getFile, http.MethodHead: s.getFile, http.MethodPut: s.putFile, http.MethodDelete: s.deleteFile,
	}}
	fixed := map[string]route{
		"/v1/health":   {"GET, HEAD", map[string]http.HandlerFunc{http.MethodGet: s.health, http.MethodHead: s.health}},
		"/v1/metadata": {"GET, HEAD", map[string]http.HandlerFunc{http.MethodGet: s.metadata, http.MethodHead: s.metadata}},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := fixed[r.URL.Path]
		if path, isFile := strings.CutPrefix(r.URL.Path, "/v1/files/"); isFile || r.URL.Path == "/v1/files" {
			if !isFile {
				path = "" // the root: CutPrefix gave the whole path back, "/v1/files", a file under it
			}
			rt, ok = files, true
			r.SetPathValue("path", path)
		}
		if !ok {
			writeError(w, http.StatusNotFound, codeNotFound, "no route %s", r.URL.Path)
			return
		}
		h := rt.serve[r.Method]
		if h == nil {
			w.Header().Set("Allow", rt.methods)
			writeError(w, http.StatusMethodNotAllowed, codeInvalidArgument, "%s takes %s, not %s", r.URL.Path, rt.methods, r.Method)
			return
		}
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client went away: nobody to tell
}

func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	writeJSON(w, status, APIError{Code: code, Message: fmt.Sprintf(format, args...)})
}

// fileError answers err of a file operation on the client's path p.
func fileError(w http.ResponseWriter, p string, err error) {
	var be *bodyError
	if errors.As(err, &be) {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, "%s", be)
		return
	}
	f := classifyPath(p, err)
	if f.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1") // as conch's API answers its own 429
	}
	writeError(w, f.status, f.code, "%s", f.msg)
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	target, err := s.resolve(p)
	if err != nil {
		fileError(w, p, err)
		return
	}
	b, err := s.beneath()
	if err != nil {
		fileError(w, p, err)
		return
	}
	defer b.Close()
	// A special file is refused before it is opened: opening a device
	// acts on it (a terminal becomes the controlling terminal of a daemon
	// that leads its session, as in a container, and its hangup then
	// stops the daemon; a locked one fails with EIO). Both this look and
	// the open are through an os.Root of the root (see beneath.go): what
	// they find is beneath the root, or they fail.
	if fi, err := b.Stat(target); err != nil {
		fileError(w, p, err)
		return
	} else if !fi.IsDir() && namesDirectory(p) {
		notDirectory(w, p)
		return
	} else if !fi.IsDir() && !fi.Mode().IsRegular() {
		notRegular(w, p)
		return
	}
	// Should a process in the sandbox swap a special file in meanwhile:
	// non-blocking, as opening a FIFO would wait for a writer, and never a
	// controlling terminal.
	f, err := b.OpenFile(target, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		fileError(w, p, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		fileError(w, p, err)
		return
	}
	if fi.IsDir() {
		s.listDir(w, p, b, target, f)
		return
	}
	if namesDirectory(p) {
		notDirectory(w, p)
		return
	}
	if !fi.Mode().IsRegular() {
		notRegular(w, p)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	// From the open file: a rename or delete after the open leaves this
	// download whole. ServeContent streams it, and answers HEAD and ranges.
	iw := &idleWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: s.opts.IOIdle}
	http.ServeContent(iw, r, "", fi.ModTime(), f)
	if iw.failed != 0 {
		// ServeContent's own refusals (a range past the end, a failed
		// If-Unmodified-Since) are plain text: said as this API's errors.
		code := codeInvalidArgument
		if iw.failed == http.StatusPreconditionFailed {
			code = codeFailedPrecondition
		}
		msg := strings.TrimSpace(iw.text.String())
		if msg == "" {
			msg = fmt.Sprintf("%s: %s", http.StatusText(iw.failed), p)
		}
		writeError(w, iw.failed, code, "%s", msg)
	}
}

// namesDirectory reports whether the client's path p ends as a
// directory's path does: with "/" or "/.". What is there must be a
// directory, as open and unlink of such a path want one (ENOTDIR): GET
// and DELETE of a file so named are refused, and PUT of any.
func namesDirectory(p string) bool {
	return strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.")
}

// notDirectory refuses a GET or DELETE of p, which ends with "/" (see
// namesDirectory) and is no directory.
func notDirectory(w http.ResponseWriter, p string) {
	writeError(w, http.StatusBadRequest, codeInvalidArgument, "%q ends with /, as a directory's path does, and is not a directory (name a file without the /)", p)
}

// withoutDirSuffix returns p, which namesDirectory, without the "/" and
// "/." it ends with.
func withoutDirSuffix(p string) string {
	for namesDirectory(p) {
		p = strings.TrimSuffix(strings.TrimSuffix(p, "/"), "/.")
	}
	return p
}

// notRegular refuses a GET of p, a special file (a FIFO, a socket, a
// device).
func notRegular(w http.ResponseWriter, p string) {
	writeError(w, http.StatusBadRequest, codeInvalidArgument, "%q is not a regular file", p)
}

// idleWriter gives each write of an answer idle to reach the client: one
// that reads nothing for that long is let go, its connection closed, rather
// than holding the request (and a download's open file) for as long as it
// keeps the connection. net/http clears the deadline once the answer is
// done.
// An error status ServeContent answers (and the text it writes with it) is
// kept back instead, for getFile to answer as this API's error.
type idleWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	idle   time.Duration
	failed int          // the error status kept back, if any
	text   bytes.Buffer // what came with it
}

func (w *idleWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		w.failed = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *idleWriter) Write(p []byte) (int, error) {
	if w.failed != 0 {
		if w.text.Len() < 1024 {
			w.text.Write(p[:min(len(p), 1024-w.text.Len())])
		}
		return len(p), nil
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}

// listDir answers the listing of the directory dir, open as f, which the
// client named p; its entries are looked at through b. A symlink is
// listed as what it points to, and left out when that is outside the root
// or missing.
//
// The listing is streamed: only the entries' names are read whole (to sort
// them), and each entry is looked up and encoded as it is written, so a
// directory of a million entries does not cost its whole listing in memory
// (about 750 bytes an entry, built and encoded at once) before its first
// byte is sent.
func (s *Server) listDir(w http.ResponseWriter, p string, b *beneath, dir string, f *os.File) {
	names, err := f.Readdirnames(-1)
	if err != nil {
		fileError(w, p, err)
		return
	}
	slices.Sort(names)
	// Written as a download is: a client that reads none of it for
	// IOIdle is let go, rather than holding the request and the directory
	// for as long as it keeps the connection.
	iw := &idleWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: s.opts.IOIdle}
	iw.Header().Set("Content-Type", "application/json")
	iw.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(iw, listingBatch)
	path, _ := json.Marshal("/" + strings.TrimPrefix(p, "/"))
	bw.WriteString(`{"path":`)
	bw.Write(path)
	bw.WriteString(`,"entries":[`)
	first := true
	for i, name := range names {
		names[i] = "" // written: its name is garbage as soon as the GC likes
		e, ok := s.entry(b, dir, name)
		if !ok {
			continue
		}
		b, _ := json.Marshal(e) // strings and an integer: it cannot fail
		if !first {
			bw.WriteByte(',')
		}
		first = false
		if _, err := bw.Write(b); err != nil {
			return // the client went away, or read nothing for IOIdle
		}
	}
	bw.WriteString("]}\n")
	_ = bw.Flush() // the client went away: nobody to tell
}

// listingBatch is how many bytes of a listing are encoded before they are
// written to the client.
const listingBatch = 64 << 10

// entry returns the listing's entry of name in the directory dir, and
// false when it is gone since the directory was read, or is a link that
// leads outside the root or nowhere. The entry, and a link's target, are
// looked at through b: beneath the root.
func (s *Server) entry(b *beneath, dir, name string) (FileEntry, bool) {
	fi, err := b.Lstat(filepath.Join(dir, name))
	if err != nil {
		return FileEntry{}, false
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// Walked relative to the root, not resolved: an absolute path
		// under the root's own absolute path (ROOT/tmp/root/x) would be
		// read as naming ROOT/x, and one the client did not send is not
		// held to how long a client's may be.
		rel := strings.TrimPrefix(dir, s.root)
		real, err := s.walk(rawpath.Under(rel, name), name)
		if err != nil {
			return FileEntry{}, false
		}
		if fi, err = b.Stat(real); err != nil {
			return FileEntry{}, false
		}
	}
	return FileEntry{
		Name:       name,
		Size:       fi.Size(),
		Type:       entryType(fi.Mode()),
		ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339),
		Mode:       fmt.Sprintf("%04o", fi.Mode().Perm()),
	}, true
}

// entryType is a listed entry's type: "file" and "directory" as upstream's
// contract names them, and for what is neither what it is ("fifo",
// "socket", "device", else "other") rather than "file": a client that took
// a FIFO for a file would GET it and be refused, and agent-sandbox's
// clients leave out the types they do not know.
func entryType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	mode := os.FileMode(defaultFileMode)
	if m := r.URL.Query().Get("mode"); m != "" { // an empty mode is the default, as upstream has it
		if !modePattern.MatchString(m) {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, "mode %q must match ^0[0-7]{3}$", m)
			return
		}
		v, _ := strconv.ParseUint(m, 8, 32) // the pattern allows only valid octal
		mode = os.FileMode(v)
	}
	if namesDirectory(p) {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, "%q ends with /, as a directory's path does: a file is written to a path without it", p)
		return
	}
	target, err := s.resolve(p)
	if err != nil {
		fileError(w, p, err)
		return
	}
	if target == s.root {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, "the sandbox root is a directory")
		return
	}
	if b, err := s.beneath(); err == nil {
		fi, err := b.Stat(target)
		b.Close()
		if err == nil && fi.IsDir() {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, "%q is a directory", p)
			return
		}
	}
	// Every read of the body, a multipart one's before, in and after its
	// file part, is bounded by IOIdle: one that stalled before the part
	// held its request for good, and one that stalled after it too (the
	// part's end cleared the deadline, and net/http read on for what was
	// left of the body before it answered).
	r.Body = struct {
		io.Reader
		io.Closer
	}{&clientReader{Reader: r.Body, rc: http.NewResponseController(w), idle: s.opts.IOIdle}, r.Body}
	body, err := uploaded(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, "%s", err)
		return
	}
	if err := s.writeAtomic(target, body, mode); err != nil {
		if errors.Is(err, errRootMissing) {
			writeError(w, http.StatusNotFound, codeNotFound, "the sandbox root does not exist (something removed it): %q cannot be written until it is made again", p)
			return
		}
		if errors.Is(err, errParentRemoved) {
			writeError(w, http.StatusConflict, codeConflict, "the directory of %q was removed while the file was written (something removes there): send the PUT again", p)
			return
		}
		fileError(w, p, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// uploaded returns the bytes of a PUT: its body, or the part named "file"
// of a multipart/form-data body.
func uploaded(r *http.Request) (io.Reader, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return r.Body, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fmt.Errorf("multipart body: %w", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errors.New(`multipart body has no "file" part`)
		}
		if err != nil {
			return nil, fmt.Errorf("multipart body: %w", err)
		}
		if part.FormName() == "file" {
			// The file is the part's bytes, written once the body has
			// ended: a body cut short or stalled after the part leaves
			// the file as it was.
			return io.MultiReader(partReader{part}, rest{r.Body}), nil
		}
	}
}

// partReader is a multipart upload's file part, whose read errors (a body
// cut short inside it) are the client's, as the body's are.
type partReader struct{ r io.Reader }

func (p partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	var be *bodyError
	if err != nil && err != io.EOF && !errors.As(err, &be) {
		err = &bodyError{err}
	}
	return n, err
}

// rest reads what is left of a body to its end, giving none of it: the
// parts after a multipart upload's file part, and its closing boundary.
type rest struct{ r io.Reader }

func (b rest) Read([]byte) (int, error) {
	if _, err := io.Copy(io.Discard, b.r); err != nil {
		return 0, err
	}
	return 0, io.EOF
}

// clientReader is an upload's body, whose read errors (a multipart body
// cut short, a body that ends before its length) are the client's: they
// are a bodyError. Each read is given idle: a client that sends nothing for
// that long is let go (the deadline stays, and the connection closes after
// the answer), rather than holding the request and its temporary file for
// as long as it keeps the connection.
type clientReader struct {
	io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

func (r *clientReader) Read(p []byte) (int, error) {
	_ = r.rc.SetReadDeadline(time.Now().Add(r.idle))
	n, err := r.Reader.Read(p)
	switch {
	case err == io.EOF:
		_ = r.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = &bodyError{fmt.Errorf("no byte came for %v: %w", r.idle, err)}
	case err != nil:
		err = &bodyError{err}
	}
	return n, err
}

// bodyError is an error reading a request's body.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "the request's body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, "recursive %q is not a boolean", v)
			return
		}
		recursive = b
	}
	// The entry itself is removed, a symlink rather than what it points
	// to, as rm does: only its directory is resolved, the names before
	// the last, as given (see walk).
	rel, err := s.lexical(p)
	if err != nil {
		fileError(w, p, err)
		return
	}
	target := s.root
	if rel != "/" {
		parent, name := rawpath.Split(rel)
		if name == ".." {
			// The directory it names is not removed by that name, as rm
			// refuses it: which one it is depends on where the names
			// before lead, the root itself for sub/.. (sub/. is sub, and
			// names it, the . left out by lexical).
			writeError(w, http.StatusBadRequest, codeInvalidArgument, "%q ends with .., which names the directory above: name the directory to remove by its own path", p)
			return
		}
		dir, err := s.walk(parent, p)
		if err != nil {
			fileError(w, p, err)
			return
		}
		target = rawpath.Under(dir, name)
	}
	s.remove(w, p, target, recursive, namesDirectory(p))
}

// remove removes target, which the client named p, through an os.Root
// of the root (see beneath.go). With dirOnly (p ends with "/"), target
// must be a directory, as unlink and rmdir of such a path refuse anything
// else (ENOTDIR): a symlink to a directory too, whose "/" names the
// directory it leads to, not the link, which rm -r empties before it
// fails; neither is removed, and the message says how to name each.
func (s *Server) remove(w http.ResponseWriter, p, target string, recursive, dirOnly bool) {
	b, err := s.beneath()
	if err != nil {
		fileError(w, p, err)
		return
	}
	defer b.Close()
	fi, err := b.Lstat(target)
	if err != nil {
		fileError(w, p, err)
		return
	}
	if dirOnly && !fi.IsDir() {
		if fi.Mode()&fs.ModeSymlink == 0 {
			notDirectory(w, p)
			return
		}
		if to, err := b.Stat(target); err == nil && to.IsDir() {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, "%q ends with / and is a symlink to a directory: the / names the directory it leads to, which is not removed through the link; DELETE %q removes the link, and the directory's own path removes the directory", p, withoutDirSuffix(p))
			return
		}
		notDirectory(w, p)
		return
	}
	if target == s.root {
		if !recursive {
			writeError(w, http.StatusConflict, codeConflict, "the sandbox root is not removed: pass recursive=true to empty it")
			return
		}
		// The root is often a mount point: emptied, not removed.
		root, err := b.OpenFile(target, os.O_RDONLY, 0)
		if err != nil {
			fileError(w, p, err)
			return
		}
		defer root.Close()
		names, err := root.Readdirnames(-1)
		if err != nil {
			fileError(w, p, err)
			return
		}
		for _, name := range names {
			if err := b.RemoveAll(filepath.Join(target, name)); err != nil {
				removeError(w, p, err)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if recursive && fi.IsDir() {
		if err := b.RemoveAll(target); err != nil {
			removeError(w, p, err)
			return
		}
	} else if err := b.Remove(target); err != nil {
		fileError(w, p, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// removeError answers a recursive DELETE that failed: one that entries
// added meanwhile kept from its end says so (it was told to pass
// recursive=true, which it had).
func removeError(w http.ResponseWriter, p string, err error) {
	if errors.Is(err, syscall.ENOTEMPTY) {
		writeError(w, http.StatusConflict, codeConflict, "entries were added under %q while it was removed (something writes there): send the DELETE again", p)
		return
	}
	fileError(w, p, err)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !s.Ready() {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "sandboxd is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, HealthResponse{Status: "ok", UptimeSeconds: int64(time.Since(s.started).Seconds())})
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, MetadataResponse{Env: s.meta})
}

// credentialMarkers are the parts of a variable name that keep it off
// /v1/metadata even with the prefix: agent code in the sandbox can read the
// endpoint, so what looks like a credential is never served.
var credentialMarkers = []string{
	"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY", "AUTH", "BEARER", "PRIVATE", "CERT",
}

// metadataEnv returns the variables of environ that /v1/metadata serves:
// those named with prefix and not like a credential.
func metadataEnv(environ []string, prefix string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, prefix) || credentialLike(name) {
			continue
		}
		env[name] = value
	}
	return env
}

func credentialLike(name string) bool {
	upper := strings.ToUpper(name)
	for _, m := range credentialMarkers {
		if strings.Contains(upper, m) {
			return true
		}
	}
	return false
}
