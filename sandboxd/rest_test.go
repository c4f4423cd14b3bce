package sandboxd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/internal/unreadconn"
)

// apiError decodes an error body and requires code and message.
func apiError(t *testing.T, body []byte) APIError {
	t.Helper()
	var e APIError
	require.NoError(t, json.Unmarshal(body, &e), "body %s", body)
	require.NotEmpty(t, e.Code)
	require.NotEmpty(t, e.Message)
	return e
}

func TestFilesPutGetRoundTrip(t *testing.T) {
	d := serve(t, Options{})
	code, _, _ := d.do(t, "PUT", "/v1/files/hello.txt", strings.NewReader("payload"), nil)
	require.Equal(t, http.StatusNoContent, code)
	onDisk, err := os.ReadFile(filepath.Join(d.root, "hello.txt"))
	require.NoError(t, err)
	require.Equal(t, "payload", string(onDisk))

	code, h, body := d.do(t, "GET", "/v1/files/hello.txt", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "application/octet-stream", h.Get("Content-Type"))
	require.Equal(t, "payload", string(body))
}

func TestFilesPutCreatesParents(t *testing.T) {
	d := serve(t, Options{})
	code, _, _ := d.do(t, "PUT", "/v1/files/a/b/c/deep.txt", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusNoContent, code)
	require.FileExists(t, filepath.Join(d.root, "a", "b", "c", "deep.txt"))
}

func TestFilesPutMode(t *testing.T) {
	d := serve(t, Options{})
	code, _, _ := d.do(t, "PUT", "/v1/files/run.sh?mode=0755", strings.NewReader("#!/bin/sh\n"), nil)
	require.Equal(t, http.StatusNoContent, code)
	fi, err := os.Stat(filepath.Join(d.root, "run.sh"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	code, _, _ = d.do(t, "PUT", "/v1/files/plain.txt", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusNoContent, code)
	fi, err = os.Stat(filepath.Join(d.root, "plain.txt"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "the default mode")

	for _, mode := range []string{"0999", "777", "abcd", "01777", "4755", "0o644", "0644%0A"} {
		code, _, body := d.do(t, "PUT", "/v1/files/f.txt?mode="+mode, strings.NewReader("x"), nil)
		require.Equal(t, http.StatusBadRequest, code, "mode %q", mode)
		require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	}
	require.NoFileExists(t, filepath.Join(d.root, "f.txt"), "a refused write writes nothing")
}

func TestFilesPutReplacesWholeAndLeavesNoTemporary(t *testing.T) {
	d := serve(t, Options{})
	for _, content := range []string{"old", "new"} {
		code, _, _ := d.do(t, "PUT", "/v1/files/f.txt", strings.NewReader(content), nil)
		require.Equal(t, http.StatusNoContent, code)
	}
	onDisk, err := os.ReadFile(filepath.Join(d.root, "f.txt"))
	require.NoError(t, err)
	require.Equal(t, "new", string(onDisk))
	entries, err := os.ReadDir(d.root)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
}

// TestFilesPutIsAtomic reads a file while it is rewritten again and again
// with contents of another length: every read sees one whole version.
func TestFilesPutIsAtomic(t *testing.T) {
	d := serve(t, Options{})
	versions := []string{strings.Repeat("a", 1<<20), strings.Repeat("b", 3<<20)}
	code, _, _ := d.do(t, "PUT", "/v1/files/big", strings.NewReader(versions[0]), nil)
	require.Equal(t, http.StatusNoContent, code)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 10 {
			code, _, _ := d.do(t, "PUT", "/v1/files/big", strings.NewReader(versions[(i+1)%2]), nil)
			assert.Equal(t, http.StatusNoContent, code)
		}
	})
	for range 10 {
		b, err := os.ReadFile(filepath.Join(d.root, "big"))
		require.NoError(t, err)
		require.Contains(t, versions, string(b), "a read saw a partial file of %d bytes", len(b))
	}
	wg.Wait()
}

func TestFilesPutMultipart(t *testing.T) {
	d := serve(t, Options{})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	require.NoError(t, mw.WriteField("other", "ignored"))
	part, err := mw.CreateFormFile("file", "upload.bin")
	require.NoError(t, err)
	_, err = part.Write([]byte("multipart-payload"))
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	code, _, _ := d.do(t, "PUT", "/v1/files/upload.bin", &buf, http.Header{"Content-Type": {mw.FormDataContentType()}})
	require.Equal(t, http.StatusNoContent, code)
	onDisk, err := os.ReadFile(filepath.Join(d.root, "upload.bin"))
	require.NoError(t, err)
	require.Equal(t, "multipart-payload", string(onDisk))

	buf.Reset()
	mw = multipart.NewWriter(&buf)
	require.NoError(t, mw.WriteField("notfile", "x"))
	require.NoError(t, mw.Close())
	code, _, body := d.do(t, "PUT", "/v1/files/f.txt", &buf, http.Header{"Content-Type": {mw.FormDataContentType()}})
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	require.NoFileExists(t, filepath.Join(d.root, "f.txt"))
}

func TestFilesPutOntoDirectory(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "d"), 0o755))
	code, _, body := d.do(t, "PUT", "/v1/files/d", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	require.DirExists(t, filepath.Join(d.root, "d"))
}

func TestFilesEncodedSlashes(t *testing.T) {
	d := serve(t, Options{})
	code, _, _ := d.do(t, "PUT", "/v1/files/dir%2Fsub%2Ffile.txt", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusNoContent, code)
	require.FileExists(t, filepath.Join(d.root, "dir", "sub", "file.txt"))
}

func TestFilesListing(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "b.txt"), []byte("bb"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(d.root, "b.txt"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "adir"), 0o755))
	require.NoError(t, os.Symlink("b.txt", filepath.Join(d.root, "c-link")))

	code, h, body := d.do(t, "GET", "/v1/files/", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "application/json", h.Get("Content-Type"))
	var l DirectoryListing
	require.NoError(t, json.Unmarshal(body, &l))
	require.Equal(t, "/", l.Path)
	require.Len(t, l.Entries, 3)
	require.Equal(t, "adir", l.Entries[0].Name)
	require.Equal(t, "directory", l.Entries[0].Type)
	require.Equal(t, FileEntry{Name: "b.txt", Size: 2, Type: "file", ModifiedAt: l.Entries[1].ModifiedAt, Mode: "0600"}, l.Entries[1])
	require.Equal(t, "c-link", l.Entries[2].Name, "a link inside the root is listed as what it points to")
	require.Equal(t, int64(2), l.Entries[2].Size)
	_, err := time.Parse(time.RFC3339, l.Entries[1].ModifiedAt)
	require.NoError(t, err)

	code, _, body = d.do(t, "GET", "/v1/files/adir", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), `"entries":[]`, "an empty directory has entries [], not null")
	require.Contains(t, string(body), `"path":"/adir"`)
}

// TestFilesListingUnderTheRootsOwnPath lists a directory whose path under
// the root is the root's own absolute path (ROOT/workspace under the
// default root /workspace): its links are listed as what they point to
// there. They were once resolved as ROOT's own entries, and left out or
// listed with another file's size.
func TestFilesListingUnderTheRootsOwnPath(t *testing.T) {
	d := serve(t, Options{})
	nested := filepath.Join(d.root, d.root)
	require.NoError(t, os.MkdirAll(nested, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(nested, "target.txt"), []byte("nested"), 0o644))
	require.NoError(t, os.Symlink("target.txt", filepath.Join(nested, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "link"), []byte("the root's own"), 0o644))
	code, _, body := d.do(t, "GET", "/v1/files"+d.root, nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var l DirectoryListing
	require.NoError(t, json.Unmarshal(body, &l))
	require.Len(t, l.Entries, 2, "%s", body)
	require.Equal(t, "link", l.Entries[0].Name)
	require.Equal(t, int64(len("nested")), l.Entries[0].Size, "the link in that directory, not the root's file")
}

func TestFilesListingLeavesOutEscapingLinks(t *testing.T) {
	d := serve(t, Options{})
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(d.root, "escaping")))
	require.NoError(t, os.Symlink("missing", filepath.Join(d.root, "dangling")))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "normal.txt"), []byte("n"), 0o644))
	code, _, body := d.do(t, "GET", "/v1/files/", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var l DirectoryListing
	require.NoError(t, json.Unmarshal(body, &l))
	require.Len(t, l.Entries, 1, "%s", body)
	require.Equal(t, "normal.txt", l.Entries[0].Name)
}

// TestFilesWalkOutsideTellsNothing: a path that a link inside the root
// leads outside it, and that fails out there, is refused as escaping
// whatever it met: a 404 or a 400 told the client which names exist
// outside the root, and which are files.
func TestFilesWalkOutsideTellsNothing(t *testing.T) {
	d := serve(t, Options{})
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "file"), []byte("f"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(d.root, "out")))
	for _, p := range []string{"out/missing/%2E%2E/x", "out/file/%2E%2E/x", "out/file/x", "out/missing/x/y"} {
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			code, _, body := d.do(t, method, "/v1/files/"+p, strings.NewReader("new"), nil)
			require.Equal(t, http.StatusForbidden, code, "%s %s: %s", method, p, body)
		}
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing made outside the root")
}

func TestFilesMissing(t *testing.T) {
	d := serve(t, Options{})
	code, _, body := d.do(t, "GET", "/v1/files/nope.txt", nil, nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "NOT_FOUND", apiError(t, body).Code)
}

func TestFilesHead(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f.txt"), []byte("12345"), 0o644))
	code, h, body := d.do(t, "HEAD", "/v1/files/f.txt", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "5", h.Get("Content-Length"))
	require.Empty(t, body)
	code, _, _ = d.do(t, "HEAD", "/v1/files/absent.txt", nil, nil)
	require.Equal(t, http.StatusNotFound, code)

	// Whatever GET refuses, HEAD refuses with the same status, as the
	// route table says.
	require.NoError(t, syscall.Mkfifo(filepath.Join(d.root, "fifo"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(d.root, "sock"))
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.Symlink("loop", filepath.Join(d.root, "loop")))
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(d.root, "link-out")))
	for path, want := range map[string]int{
		"fifo": http.StatusBadRequest, "sock": http.StatusBadRequest, "loop": http.StatusBadRequest,
		"link-out": http.StatusForbidden, "%2E%2E/x": http.StatusForbidden, "absent.txt": http.StatusNotFound, "": http.StatusOK,
	} {
		get, _, _ := d.do(t, "GET", "/v1/files/"+path, nil, nil)
		head, _, body := d.do(t, "HEAD", "/v1/files/"+path, nil, nil)
		require.Equal(t, want, get, "GET %q", path)
		require.Equal(t, want, head, "HEAD %q", path)
		require.Empty(t, body, "HEAD %q", path)
	}
}

func TestFilesTraversalRefused(t *testing.T) {
	d := serve(t, Options{})
	outside := filepath.Dir(d.root)
	for _, method := range []string{"GET", "PUT", "DELETE", "HEAD"} {
		for _, p := range []string{"%2E%2E/%2E%2E/etc/passwd", "a/%2E%2E/%2E%2E/x", "%2E%2E"} {
			code, _, body := d.do(t, method, "/v1/files/"+p, strings.NewReader("x"), nil)
			require.Equal(t, http.StatusForbidden, code, "%s %s", method, p)
			if method != "HEAD" {
				require.Equal(t, "PERMISSION_DENIED", apiError(t, body).Code)
			}
		}
	}
	require.NoFileExists(t, filepath.Join(outside, "x"))
}

// TestFilesAbsoluteClimbRefused: an absolute path whose .. climbs above
// the root is refused as a relative one is, whether it starts at / or at
// the root's own absolute path. Each was cleaned first, the climb dropped
// (/.. is /) or taken past the root's prefix, and the path then read as
// one under the root: a PUT wrote ROOT/x and ROOT/tmp/.../x, a GET served
// ROOT/x.
func TestFilesAbsoluteClimbRefused(t *testing.T) {
	d := serve(t, Options{})
	escaped := func(p string) string { return strings.ReplaceAll(p, "/", "%2F") }
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "x.txt"), []byte("in the root"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(d.root, filepath.Dir(d.root)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, filepath.Dir(d.root), "x.txt"), []byte("nested"), 0o644))
	climbs := []string{
		"%2F..%2Fx.txt",
		"/../x.txt",
		"//..//x.txt",
		escaped(d.root + "/../x.txt"),
		d.root + "/../../../../x.txt",
		d.root + "/sub/../../x.txt",
		d.root + "/../" + filepath.Base(d.root) + "/x.txt",
		"%2Fa%2F..%2F..%2Fx.txt",
	}
	for _, method := range []string{"GET", "HEAD", "PUT", "DELETE"} {
		for _, p := range climbs {
			code, _, body := d.do(t, method, "/v1/files/"+p, strings.NewReader("planted"), nil)
			require.Equal(t, http.StatusForbidden, code, "%s %s: %s", method, p, body)
			if method != "HEAD" {
				require.Equal(t, "PERMISSION_DENIED", apiError(t, body).Code, "%s %s", method, p)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(d.root, "x.txt"))
	require.NoError(t, err)
	require.Equal(t, "in the root", string(b))
	b, err = os.ReadFile(filepath.Join(d.root, filepath.Dir(d.root), "x.txt"))
	require.NoError(t, err)
	require.Equal(t, "nested", string(b))

	// A .. that stays inside goes up from the directory before it, as in
	// a relative path.
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "sub"), 0o755))
	code, _, body := d.do(t, "GET", "/v1/files/"+d.root+"/sub/../x.txt", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "in the root", string(body))
	code, _, body = d.do(t, "GET", "/v1/files/%2Fsub%2F..%2Fx.txt", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "in the root", string(body))
}

// TestFilesRootThroughALink serves a root configured as a symlink: the
// configured path names the root as its real path does. It was taken as a
// path under the root, and a PUT made ROOT/.../link/new.txt.
func TestFilesRootThroughALink(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "rootlink")
	require.NoError(t, os.Symlink(real, link))
	d := serve(t, Options{Root: link})
	require.Equal(t, real, d.root)

	code, _, body := d.do(t, "PUT", "/v1/files/"+link+"/new.txt", strings.NewReader("through the link"), nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	b, err := os.ReadFile(filepath.Join(real, "new.txt"))
	require.NoError(t, err)
	require.Equal(t, "through the link", string(b))
	code, _, body = d.do(t, "GET", "/v1/files/"+strings.ReplaceAll(link+"/new.txt", "/", "%2F"), nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "through the link", string(body))
	code, _, body = d.do(t, "GET", "/v1/files/"+real+"/new.txt", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "through the link", string(body))

	code, _, _ = d.do(t, "PUT", "/v1/files/"+link+"/../planted", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusForbidden, code)
	require.NoFileExists(t, filepath.Join(filepath.Dir(link), "planted"))
	entries, err := os.ReadDir(real)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only new.txt: nothing made under the root's name")
}

func TestFilesSymlinkEscapeRefused(t *testing.T) {
	d := serve(t, Options{})
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(d.root, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "new-dir"), filepath.Join(d.root, "dangling")))
	require.NoError(t, os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(d.root, "rel")))

	code, _, _ := d.do(t, "GET", "/v1/files/link/secret", nil, nil)
	require.Equal(t, http.StatusForbidden, code)
	code, _, _ = d.do(t, "GET", "/v1/files/rel", nil, nil)
	require.Equal(t, http.StatusForbidden, code)
	code, _, _ = d.do(t, "PUT", "/v1/files/link/planted", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusForbidden, code)
	code, _, _ = d.do(t, "PUT", "/v1/files/dangling/sub/planted", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusForbidden, code, "a dangling link is followed too: a write through it would create its target")
	code, _, _ = d.do(t, "DELETE", "/v1/files/link/secret", nil, nil)
	require.Equal(t, http.StatusForbidden, code)
	require.NoFileExists(t, filepath.Join(outside, "planted"))
	require.NoDirExists(t, filepath.Join(outside, "new-dir"))
	require.FileExists(t, filepath.Join(outside, "secret"))

	// The root's own absolute path names the root.
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "in.txt"), []byte("in"), 0o644))
	code, _, body := d.do(t, "GET", "/v1/files/"+strings.ReplaceAll(d.root+"/in.txt", "/", "%2F"), nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "in", string(body))
}

func TestFilesDelete(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f.txt"), []byte("x"), 0o644))
	code, _, _ := d.do(t, "DELETE", "/v1/files/f.txt", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	code, _, body := d.do(t, "DELETE", "/v1/files/f.txt", nil, nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "NOT_FOUND", apiError(t, body).Code)

	require.NoError(t, os.MkdirAll(filepath.Join(d.root, "d", "e"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "d", "e", "f.txt"), []byte("x"), 0o644))
	code, _, body = d.do(t, "DELETE", "/v1/files/d", nil, nil)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "CONFLICT", apiError(t, body).Code)
	code, _, body = d.do(t, "DELETE", "/v1/files/d?recursive=banana", nil, nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	code, _, _ = d.do(t, "DELETE", "/v1/files/d?recursive=true", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	require.NoDirExists(t, filepath.Join(d.root, "d"))
}

// A relative path whose text is the root's own absolute path names a
// directory under the root, for DELETE as for GET and PUT: the parent of
// tmp/x/root/sub was resolved again as the root's absolute path, and the
// root's own sub was removed in its place.
func TestFilesDeleteUnderTheRootsName(t *testing.T) {
	d := serve(t, Options{})
	named := strings.TrimPrefix(d.root, "/")
	nested := filepath.Join(d.root, named)
	require.NoError(t, os.MkdirAll(filepath.Join(nested, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(nested, "sub", "n"), []byte("nested"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(nested, "f"), []byte("nested"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "sub", "important"), []byte("keep"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f"), []byte("keep"), 0o644))

	code, _, body := d.do(t, "GET", "/v1/files/"+named+"/f", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "nested", string(body), "GET names the nested file")
	code, _, _ = d.do(t, "DELETE", "/v1/files/"+named+"/f", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	require.NoFileExists(t, filepath.Join(nested, "f"))
	require.FileExists(t, filepath.Join(d.root, "f"), "the root's own f stays")
	code, _, _ = d.do(t, "DELETE", "/v1/files/"+named+"/sub?recursive=true", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	require.NoDirExists(t, filepath.Join(nested, "sub"))
	require.FileExists(t, filepath.Join(d.root, "sub", "important"), "the root's own sub stays")
}

// A loop of symbolic links is the client's path that cannot be used (400),
// not the daemon's failure (500).
func TestFilesSymlinkLoop(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.Symlink("loop1", filepath.Join(d.root, "loop2")))
	require.NoError(t, os.Symlink("loop2", filepath.Join(d.root, "loop1")))
	for _, method := range []string{"GET", "PUT"} {
		code, _, body := d.do(t, method, "/v1/files/loop1", strings.NewReader("x"), nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", method, body)
		require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	}
}

// TestFilesDotDotAsTheKernelWalksIt: a ".." is taken where the kernel
// takes it, not cleaned away with the name before it first. After a file,
// GET, PUT and DELETE fail as open and unlink do (ENOTDIR, 400); after a
// name that does not exist, as they do too (ENOENT, 404); after a symlink,
// it goes up from where the link leads. Cleaned first, plain/../x was x:
// GET served it, PUT wrote it and DELETE removed it, and link/../x was the
// x beside the link. A DELETE of a path ending with ".." is refused: it
// names the directory above (sub/.. the root, which recursive=true
// emptied).
func TestFilesDotDotAsTheKernelWalksIt(t *testing.T) {
	d := serve(t, Options{})
	write := func(rel, text string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(d.root, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d.root, rel), []byte(text), 0o644))
	}
	write("plain", "plain")
	write("x", "top")
	write("a/b/x", "beside b")
	require.NoError(t, os.Symlink("a/b/c", filepath.Join(d.root, "link"))) // dangling below b
	require.NoError(t, os.Symlink("a/b", filepath.Join(d.root, "tob")))
	for _, c := range []struct {
		path string
		code int
	}{
		{"plain/%2E%2E/x", http.StatusBadRequest},
		{"plain/%2E%2E/new", http.StatusBadRequest},
		{"nodir/%2E%2E/x", http.StatusNotFound},
		{"nodir/%2E%2E/new", http.StatusNotFound},
		{"link/%2E%2E/x", http.StatusNotFound}, // a/b/c is missing: its .. is ENOENT
	} {
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			code, _, body := d.do(t, method, "/v1/files/"+c.path, strings.NewReader("new"), nil)
			require.Equal(t, c.code, code, "%s %s: %s", method, c.path, body)
		}
	}
	for rel, text := range map[string]string{"plain": "plain", "x": "top", "a/b/x": "beside b"} {
		b, err := os.ReadFile(filepath.Join(d.root, rel))
		require.NoError(t, err)
		require.Equal(t, text, string(b), "%s is left as it was", rel)
	}
	require.NoFileExists(t, filepath.Join(d.root, "new"))
	require.NoDirExists(t, filepath.Join(d.root, "nodir"))

	// Through a link to a directory, .. is that directory's parent.
	code, _, body := d.do(t, "GET", "/v1/files/tob/%2E%2E/b/x", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "beside b", string(body))
	code, _, body = d.do(t, "PUT", "/v1/files/tob/%2E%2E/y", strings.NewReader("y"), nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	require.FileExists(t, filepath.Join(d.root, "a", "y"))
	require.NoFileExists(t, filepath.Join(d.root, "y"))
	code, _, body = d.do(t, "DELETE", "/v1/files/tob/%2E%2E/y", nil, nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	require.NoFileExists(t, filepath.Join(d.root, "a", "y"))

	for _, p := range []string{"a/%2E%2E", "a/b/%2E%2E/"} {
		code, _, body = d.do(t, "DELETE", "/v1/files/"+p+"?recursive=true", nil, nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", p, body)
		require.Contains(t, apiError(t, body).Message, "ends with ..", p)
	}
	require.FileExists(t, filepath.Join(d.root, "x"), "the root is not emptied")
	require.FileExists(t, filepath.Join(d.root, "a", "b", "x"))
}

// TestFilesDeleteLinkRemovesTheLink: DELETE of a symlink removes the link,
// as rm does, never what it points to. With a "/" after it, a link to a
// directory names the directory it leads to, as rmdir and unlink take it
// (ENOTDIR): that is refused 400, removing neither, the message saying
// how to name each (rm -r link/ empties the directory, then fails). The
// link was removed, which the path with its "/" does not name.
func TestFilesDeleteLinkRemovesTheLink(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "target"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "target", "keep"), []byte("k"), 0o644))
	require.NoError(t, os.Symlink("target", filepath.Join(d.root, "link")))
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "empty"), 0o755))
	require.NoError(t, os.Symlink("empty", filepath.Join(d.root, "toempty")))
	for _, p := range []string{"link/", "link/?recursive=true", "link%2F.?recursive=true", "toempty/", "toempty//"} {
		code, _, body := d.do(t, "DELETE", "/v1/files/"+p, nil, nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", p, body)
		e := apiError(t, body)
		require.Equal(t, "INVALID_ARGUMENT", e.Code)
		require.Contains(t, e.Message, "is a symlink to a directory", p)
		require.Contains(t, e.Message, `DELETE "`+p[:strings.IndexAny(p, "/%")]+`" removes the link`, p)
	}
	for _, link := range []string{"link", "toempty"} {
		_, err := os.Lstat(filepath.Join(d.root, link))
		require.NoError(t, err, "%s is left", link)
	}
	require.DirExists(t, filepath.Join(d.root, "empty"))
	require.FileExists(t, filepath.Join(d.root, "target", "keep"))

	code, _, _ := d.do(t, "DELETE", "/v1/files/link?recursive=true", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	require.NoFileExists(t, filepath.Join(d.root, "link"))
	require.FileExists(t, filepath.Join(d.root, "target", "keep"), "what the link pointed to stays, as with rm")
}

func TestFilesDeleteRootEmptiesIt(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f.txt"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "d"), 0o755))
	code, _, body := d.do(t, "DELETE", "/v1/files/", nil, nil)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "CONFLICT", apiError(t, body).Code)
	code, _, _ = d.do(t, "DELETE", "/v1/files/?recursive=true", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	entries, err := os.ReadDir(d.root)
	require.NoError(t, err)
	require.Empty(t, entries)
	require.DirExists(t, d.root)
}

// notReady is a Readiness that says no.
type notReady struct{}

func (notReady) Ready() bool { return false }

func TestHealth(t *testing.T) {
	d := serve(t, Options{})
	code, _, body := d.do(t, "GET", "/v1/health", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var h HealthResponse
	require.NoError(t, json.Unmarshal(body, &h))
	require.Equal(t, "ok", h.Status)
	require.GreaterOrEqual(t, h.UptimeSeconds, int64(0))

	require.NoError(t, d.srv.Shutdown(ctx(t)))
	code, _, body = d.do(t, "GET", "/v1/health", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, code, "from the start of shutdown")
	require.Equal(t, "UNAVAILABLE", apiError(t, body).Code)

	d = serve(t, Options{Readiness: notReady{}})
	code, _, _ = d.do(t, "GET", "/v1/health", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, code, "the embedding daemon's readiness counts")
}

// TestHostChecked: with Options.Host, a request whose Host it refuses (a
// DNS-rebinding page's domain) is answered 403 before any route; without,
// any Host is served.
func TestHostChecked(t *testing.T) {
	loopback := func(h string) bool { return strings.HasPrefix(h, "127.0.0.1:") }
	d := serve(t, Options{Host: loopback})
	for _, path := range []string{"/v1/health", "/v1/files/", "/v1/metadata"} {
		code, _, body := d.do(t, "GET", path, nil, http.Header{"Host": {"rebind.example:8080"}})
		require.Equal(t, http.StatusForbidden, code, "%s: %s", path, body)
		require.Equal(t, "PERMISSION_DENIED", apiError(t, body).Code)
	}
	code, _, body := d.do(t, "PUT", "/v1/files/x", strings.NewReader("x"), http.Header{"Host": {"rebind.example"}})
	require.Equal(t, http.StatusForbidden, code, body)
	require.NoFileExists(t, filepath.Join(d.root, "x"))
	code, _, _ = d.do(t, "GET", "/v1/health", nil, nil)
	require.Equal(t, http.StatusOK, code, "the server's own address")

	d = serve(t, Options{})
	code, _, _ = d.do(t, "GET", "/v1/health", nil, http.Header{"Host": {"sandbox.ns.svc:8080"}})
	require.Equal(t, http.StatusOK, code, "any host without Options.Host")
}

func TestMetadata(t *testing.T) {
	d := serve(t, Options{Environ: []string{
		"SANDBOX_ID=sbx-123",
		"SANDBOX_WORKSPACE=/workspace",
		"SANDBOX_API_TOKEN=secret",
		"SANDBOX_SSH_KEY=secret",
		"SANDBOX_AUTH_HEADER=secret",
		"SANDBOX_BEARER=secret",
		"SANDBOX_DB_CREDENTIAL=secret",
		"SANDBOX_PASSWORD=secret",
		"SANDBOX_PASSWD=secret",
		"SANDBOX_TLS_CERT=secret",
		"SANDBOX_PRIVATE_URL=secret",
		"SANDBOX_client_secret=secret",
		"KUBERNETES_SERVICE_HOST=10.0.0.1",
		"MALFORMED",
	}})
	code, _, body := d.do(t, "GET", "/v1/metadata", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var m MetadataResponse
	require.NoError(t, json.Unmarshal(body, &m))
	require.Equal(t, map[string]string{"SANDBOX_ID": "sbx-123", "SANDBOX_WORKSPACE": "/workspace"}, m.Env)

	d = serve(t, Options{Environ: []string{"SANDBOX_ID=1", "POD_NAME=p"}, MetadataPrefix: "POD_"})
	_, _, body = d.do(t, "GET", "/v1/metadata", nil, nil)
	require.JSONEq(t, `{"env":{"POD_NAME":"p"}}`, string(body))
}

// TestFilesSpecial reads a FIFO a process made, that nothing writes to,
// and through a link: refused at once, not a request that waits for a
// writer.
func TestFilesSpecial(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, syscall.Mkfifo(filepath.Join(d.root, "fifo"), 0o644))
	require.NoError(t, os.Symlink("fifo", filepath.Join(d.root, "link")))
	for _, method := range []string{"GET", "HEAD"} {
		for _, path := range []string{"/v1/files/fifo", "/v1/files/link"} {
			code, _, body := d.do(t, method, path, nil, nil)
			require.Equal(t, http.StatusBadRequest, code, "%s %s", method, path)
			if method == "GET" {
				require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
			}
		}
	}
}

// TestFilesListingSpecial lists a FIFO and a socket as what they are (a
// link as what it points to). Both were listed as files, which a client
// would then GET and be refused.
func TestFilesListingSpecial(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, syscall.Mkfifo(filepath.Join(d.root, "fifo"), 0o644))
	require.NoError(t, os.Symlink("fifo", filepath.Join(d.root, "fifo-link")))
	ln, err := net.Listen("unix", filepath.Join(d.root, "sock"))
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "regular"), []byte("x"), 0o644))
	code, _, body := d.do(t, "GET", "/v1/files/", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var l DirectoryListing
	require.NoError(t, json.Unmarshal(body, &l))
	types := map[string]string{}
	for _, e := range l.Entries {
		types[e.Name] = e.Type
	}
	require.Equal(t, map[string]string{"fifo": "fifo", "fifo-link": "fifo", "sock": "socket", "regular": "file"}, types)
}

// TestFilesDownloadOutlivesDelete deletes a file while its download is
// read: the download still gets every byte.
func TestFilesDownloadOutlivesDelete(t *testing.T) {
	d := serve(t, Options{})
	content := strings.Repeat("0123456789", 1<<20) // 10 MiB: more than the connection buffers
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "big"), []byte(content), 0o644))
	req, err := http.NewRequestWithContext(ctx(t), "GET", d.rest+"/v1/files/big", nil)
	require.NoError(t, err)
	resp, err := d.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	first := make([]byte, 1000)
	_, err = io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	code, _, _ := d.do(t, "DELETE", "/v1/files/big", nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, content, string(first)+string(rest))
}

// TestFilesFailedUploadLeavesNothing cuts an upload off midway: the file
// keeps its old content and no temporary file is left. While it comes, the
// upload is in a file of the directory's with no name (where the
// filesystem has them, as here): a daemon killed meanwhile leaves nothing,
// where a named temporary file stayed for good.
func TestFilesFailedUploadLeavesNothing(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f"), []byte("old"), 0o644))
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx(t), "PUT", d.rest+"/v1/files/f", pr)
	require.NoError(t, err)
	req.ContentLength = 1 << 20
	done := make(chan error, 1)
	go func() {
		resp, err := d.http.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	_, err = pw.Write([]byte(strings.Repeat("x", 1000)))
	require.NoError(t, err)
	// Once the daemon has the temporary file, cut the upload off.
	require.Eventually(t, func() bool { return unnamedIn(t, d.root) == 1 }, 20*time.Second, 5*time.Millisecond,
		"the upload goes to an unnamed file of its directory")
	require.Empty(t, temporaries(t, d.root), "a temporary file named in the directory while the upload comes")
	pw.CloseWithError(errors.New("cut off"))
	require.Error(t, <-done)
	require.Eventually(t, func() bool { return len(temporaries(t, d.root)) == 0 }, 20*time.Second, 5*time.Millisecond,
		"the temporary file of the failed upload is removed")
	b, err := os.ReadFile(filepath.Join(d.root, "f"))
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
}

// unnamedIn counts the files this process holds open that are in dir and
// have no name there (O_TMPFILE): /proc shows them as dir/#INODE (deleted).
func unnamedIn(t *testing.T, dir string) int {
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil &&
			strings.HasPrefix(l, dir+"/#") && strings.HasSuffix(l, " (deleted)") {
			n++
		}
	}
	return n
}

func temporaries(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestNewRefusesBadRoot(t *testing.T) {
	_, err := New(Options{})
	require.Error(t, err, "an empty root would confine nothing")
	_, err = New(Options{Root: filepath.Join(t.TempDir(), "missing")})
	require.Error(t, err)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = New(Options{Root: f})
	require.Error(t, err)
}

// TestFilesClientErrors: a socket read, a path with a NUL byte or a name
// over 255 bytes, and a multipart upload cut short are 400
// INVALID_ARGUMENT, the client's doing; each was 500 INTERNAL, the last
// two echoing the root's path on disk.
func TestFilesClientErrors(t *testing.T) {
	d := serve(t, Options{})
	ln, err := net.Listen("unix", filepath.Join(d.root, "sock"))
	require.NoError(t, err)
	defer ln.Close()
	for _, path := range []string{"/v1/files/sock", "/v1/files/a.txt%00", "/v1/files/" + strings.Repeat("n", 300)} {
		code, _, body := d.do(t, "GET", path, nil, nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", path, body)
		require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code, path)
		require.NotContains(t, string(body), d.root, path)
	}
	cut := "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nhello"
	code, _, body := d.do(t, "PUT", "/v1/files/mp.txt", strings.NewReader(cut),
		http.Header{"Content-Type": {"multipart/form-data; boundary=XX"}})
	require.Equal(t, http.StatusBadRequest, code, "%s", body)
	require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	require.NoFileExists(t, filepath.Join(d.root, "mp.txt"))
}

// TestFilesStalledUpload: an upload whose client stops sending is let go
// once no byte came for IOIdle — 400, its temporary file removed, the file
// it would have replaced left as it was. It held its request, and the
// temporary file, for as long as the client kept the connection open; a
// multipart one that stopped before its file part held it still.
func TestFilesStalledUpload(t *testing.T) {
	t.Run("body", func(t *testing.T) { stalledUpload(t, "", strings.Repeat("x", 1000)) })
	t.Run("multipart before its file", func(t *testing.T) {
		stalledUpload(t, "multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nabc")
	})
	// The file part whole, then a stall: the upload was written and no
	// answer ever came (net/http read on for the rest of the body with no
	// deadline).
	t.Run("multipart after its file", func(t *testing.T) {
		stalledUpload(t, "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nnew\r\n--XX\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nzz")
	})
}

func stalledUpload(t *testing.T, contentType, sent string) {
	d := serve(t, Options{IOIdle: 200 * time.Millisecond})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f"), []byte("old"), 0o644))
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequestWithContext(ctx(t), "PUT", d.rest+"/v1/files/f", pr)
	require.NoError(t, err)
	req.ContentLength = 1 << 20
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := d.http.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode, body: b}
	}()
	_, err = pw.Write([]byte(sent))
	require.NoError(t, err)
	select {
	case a := <-done:
		require.NoError(t, a.err)
		require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
		require.Contains(t, apiError(t, a.body).Message, "no byte came for 200ms")
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled upload was never let go")
	}
	require.Eventually(t, func() bool { return len(temporaries(t, d.root)) == 0 }, 20*time.Second, 5*time.Millisecond)
	b, err := os.ReadFile(filepath.Join(d.root, "f"))
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
}

// TestFilesUnreadDownload: a download whose client reads nothing is let go
// once a write of it has waited IOIdle, its connection closed. It held its
// request and the open file for as long as the client kept the connection.
func TestFilesUnreadDownload(t *testing.T) {
	d := serve(t, Options{IOIdle: 100 * time.Millisecond})
	const size = 16 << 20
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "big"), make([]byte, size), 0o644))
	got := getUnread(t, d, "/v1/files/big")
	require.Less(t, got, int64(size), "the daemon let the download go: the connection closed short of the file")
}

// getUnread sends GET path on a connection that reads nothing until the
// daemon has closed its end (or 10 s, far past the IOIdle of the tests
// that call it), then reads what comes until the end of what the daemon
// sent (or 30 s), and returns how much came. A fixed wait was too short on
// a loaded machine, where the daemon was still encoding a listing when the
// client began reading, and so never had to wait for it.
func getUnread(t *testing.T, d *daemon, path string) int64 {
	t.Helper()
	conn, err := unreadconn.Dial(ctx(t), strings.TrimPrefix(d.rest, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	require.NoError(t, err)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		state, _, found, err := unreadconn.ServerEnd(conn)
		require.NoError(t, err)
		if !found || state != unreadconn.Established {
			break
		}
	}
	got, _ := io.Copy(io.Discard, conn)
	return got
}

// TestFilesUnreadListing: a directory's listing whose client reads nothing
// is let go as a download is. It held its request, the open directory and
// the listing for as long as the client kept the connection.
func TestFilesUnreadListing(t *testing.T) {
	d := serve(t, Options{IOIdle: 100 * time.Millisecond})
	dir := filepath.Join(d.root, "big")
	require.NoError(t, os.Mkdir(dir, 0o755))
	const files = 40_000 // about 12 MB of listing: more than the sockets hold
	long := strings.Repeat("n", 200)
	for i := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%06d", long, i)))
		require.NoError(t, err)
		f.Close()
	}
	got := getUnread(t, d, "/v1/files/big")
	require.Less(t, got, int64(files*200), "the daemon let the listing go: the connection closed short of it")
}

// /v1/files without its slash is the root, as /v1/files/ is: it named the
// file "v1/files" under the root, which a PUT wrote and a DELETE removed.
func TestFilesRootWithoutSlash(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "top"), []byte("x"), 0o644))
	code, _, body := d.do(t, "GET", "/v1/files", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var l DirectoryListing
	require.NoError(t, json.Unmarshal(body, &l), "%s", body)
	require.Equal(t, "/", l.Path)
	require.Len(t, l.Entries, 1)
	code, _, body = d.do(t, "PUT", "/v1/files", strings.NewReader("x"), nil)
	require.Equal(t, http.StatusBadRequest, code, "%s", body)
	require.NoDirExists(t, filepath.Join(d.root, "v1"))
}

// Every answer of the REST port is its own: a path that is not clean is
// taken as it is, not redirected to a cleaned one that can name another
// file (//ROOT/f is the root's own absolute path, ROOT/f without its slash
// a path under the root), and an unknown route or method is a JSON error.
func TestFilesRoutes(t *testing.T) {
	d := serve(t, Options{})
	named := strings.TrimPrefix(d.root, "/")
	require.NoError(t, os.MkdirAll(filepath.Join(d.root, named), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, named, "f"), []byte("nested"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f"), []byte("top"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "x"), 0o755)) // x/.. is walked: x must be a directory
	for path, want := range map[string]string{
		"/v1/files//" + named + "/f":     "top",
		"/v1/files/%2F" + named + "%2Ff": "top",
		"/v1/files/" + named + "/f":      "nested",
		"/v1/files/x/../f":               "top",
		"/v1/files/./" + named + "/./f":  "nested",
		"/v1/files//" + named + "//.//f": "top", // f/ names a directory: see TestFilesTrailingSlashOnAFile
	} {
		code, _, body := d.do(t, "GET", path, nil, nil)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		require.Equal(t, want, string(body), path)
	}
	code, _, _ := d.do(t, "PUT", "/v1/files//"+named+"/g", strings.NewReader("put"), nil)
	require.Equal(t, http.StatusNoContent, code, "not redirected")
	require.FileExists(t, filepath.Join(d.root, "g"))

	code, _, body := d.do(t, "GET", "/v1/nothing", nil, nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "NOT_FOUND", apiError(t, body).Code)
	code, h, body := d.do(t, "POST", "/v1/files/f", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)
	require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	require.Equal(t, "GET, HEAD, PUT, DELETE", h.Get("Allow"))
	code, _, body = d.do(t, "DELETE", "/v1/health", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)
	apiError(t, body)
}

// A path that ends with / names a directory: PUT does not write a file
// there.
func TestFilesPutTrailingSlash(t *testing.T) {
	d := serve(t, Options{})
	// newdir/. names the directory too: it wrote the file newdir.
	for _, path := range []string{"/v1/files/newdir/", "/v1/files/newdir%2F."} {
		code, _, body := d.do(t, "PUT", path, strings.NewReader("x"), nil)
		require.Equal(t, http.StatusBadRequest, code, path)
		require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code, path)
		require.NoFileExists(t, filepath.Join(d.root, "newdir"), path)
	}
}

// TestFilesTrailingSlashOnAFile: a path that ends with / (or /.) names a
// directory, as open and unlink take it (ENOTDIR): GET, HEAD and DELETE
// of a file so named are refused 400, as PUT is, and the file is left. GET
// served the file and DELETE removed it, where PUT refused the same path.
// A directory so named is still listed and removed.
func TestFilesTrailingSlashOnAFile(t *testing.T) {
	d := serve(t, Options{})
	plain := filepath.Join(d.root, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))
	require.NoError(t, os.Symlink("plain", filepath.Join(d.root, "tofile")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(d.root, "dangling")))
	for _, path := range []string{"plain/", "plain%2F.", "tofile/", "dangling/"} {
		for _, method := range []string{"GET", "HEAD", "DELETE", "PUT"} {
			code, _, body := d.do(t, method, "/v1/files/"+path, strings.NewReader("new"), nil)
			if (method == "GET" || method == "HEAD") && path == "dangling/" {
				// Nothing there: as open answers it (ENOENT).
				require.Equal(t, http.StatusNotFound, code, "%s %s: %s", method, path, body)
				continue
			}
			require.Equal(t, http.StatusBadRequest, code, "%s %s: %s", method, path, body)
			if method != "HEAD" {
				e := apiError(t, body)
				require.Equal(t, "INVALID_ARGUMENT", e.Code, "%s %s", method, path)
				require.Contains(t, e.Message, "ends with /", "%s %s", method, path)
			}
		}
	}
	b, err := os.ReadFile(plain)
	require.NoError(t, err)
	require.Equal(t, "x", string(b), "the file is left as it was")
	for _, link := range []string{"tofile", "dangling"} {
		_, err := os.Lstat(filepath.Join(d.root, link))
		require.NoError(t, err, "%s is left", link)
	}

	require.NoError(t, os.Mkdir(filepath.Join(d.root, "dir"), 0o755))
	code, _, body := d.do(t, "GET", "/v1/files/dir/", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	code, _, body = d.do(t, "DELETE", "/v1/files/dir/", nil, nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	require.NoDirExists(t, filepath.Join(d.root, "dir"))
}

// What net/http's ServeContent refuses (a range past the file's end, an
// If-Unmodified-Since the file is newer than) is answered as this API's
// errors, JSON.
func TestFilesServeContentRefusalsAreJSON(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f"), []byte("abc"), 0o644))
	code, h, body := d.do(t, "GET", "/v1/files/f", nil, http.Header{"Range": {"bytes=10-"}})
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, code)
	require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.Equal(t, "bytes */3", h.Get("Content-Range"))
	code, _, body = d.do(t, "GET", "/v1/files/f", nil, http.Header{"If-Unmodified-Since": {"Mon, 01 Jan 2001 00:00:00 GMT"}})
	require.Equal(t, http.StatusPreconditionFailed, code)
	require.Equal(t, "FAILED_PRECONDITION", apiError(t, body).Code)
	code, _, body = d.do(t, "GET", "/v1/files/f", nil, http.Header{"Range": {"bytes=1-"}})
	require.Equal(t, http.StatusPartialContent, code)
	require.Equal(t, "bc", string(body))
}

// TestFilesListingHeap lists a directory of 200,000 entries to a client
// that reads only its start, and measures the heap the listing holds
// meanwhile. The listing was built whole, with its JSON, before its first
// byte was sent: about 750 bytes an entry, 750 MB for a million. It is
// streamed now, entry by entry, and holds the names it sorts.
func TestFilesListingHeap(t *testing.T) {
	d := serve(t, Options{})
	dir := filepath.Join(d.root, "big")
	require.NoError(t, os.Mkdir(dir, 0o755))
	const entries = 200_000
	for i := range entries {
		fd, err := syscall.Open(filepath.Join(dir, fmt.Sprintf("%07d", i)), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
		require.NoError(t, err)
		require.NoError(t, syscall.Close(fd))
	}
	base := heaptest.Live()
	conn, err := unreadconn.Dial(ctx(t), strings.TrimPrefix(d.rest, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(60*time.Second)))
	_, err = conn.Write([]byte("GET /v1/files/big HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	require.NoError(t, err)
	start := make([]byte, 1024)
	_, err = io.ReadFull(conn, start)
	require.NoError(t, err)
	require.Contains(t, string(start), `"entries":[{"name":"0000000"`)
	held := heaptest.Live() - base
	t.Logf("%d entries: %d bytes held, %d an entry", entries, held, held/entries)
	require.Less(t, held/entries, int64(64), "bytes held an entry")
}

// TestFilesDeviceNotOpened reads a terminal device, which a GET refuses as
// the special file it is: without opening it. Opening a device acts on it
// (a terminal became the controlling terminal of a daemon that leads its
// session, as in a container, whose hangup then stopped the daemon); this
// one is a terminal whose master never unlocked it, which refuses every
// open with EIO, answered 500 INTERNAL where a special file is 400.
func TestFilesDeviceNotOpened(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no terminal to read: %v", err)
	}
	defer ptmx.Close()
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	dir := "/dev/pts"
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(n))); err != nil {
		t.Skipf("the terminal is not under %s: %v", dir, err)
	}
	d := serve(t, Options{Root: dir})
	for _, method := range []string{"GET", "HEAD"} {
		code, _, body := d.do(t, method, "/v1/files/"+strconv.Itoa(n), nil, nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", method, body)
		if method == "GET" {
			require.Equal(t, "INVALID_ARGUMENT", apiError(t, body).Code)
		}
	}
}
