package sandboxd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// deleteAll sends DELETE path?recursive=true from a goroutine that is not
// the test's (require cannot stop the test there), and returns its status.
func (d *daemon) deleteAll(path string) (int, error) {
	req, err := http.NewRequest("DELETE", d.rest+path+"?recursive=true", nil)
	if err != nil {
		return 0, err
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestFilesPutRacesRecursiveDelete: a recursive DELETE removes the
// directories a PUT has just made, before the PUT creates its file there.
// The PUT makes them again and writes its file, as a PUT that came a
// moment later would: it answered 404, for a path it creates.
func TestFilesPutRacesRecursiveDelete(t *testing.T) {
	d := serve(t, Options{})
	var calls atomic.Int32
	deleted := make(chan error, 1)
	d.srv.parentsMade = func(string) {
		if calls.Add(1) != 1 {
			return
		}
		code, err := d.deleteAll("/v1/files/top")
		if err == nil && code != http.StatusNoContent {
			err = errors.New(http.StatusText(code))
		}
		deleted <- err
	}
	code, _, body := d.do(t, "PUT", "/v1/files/top/sub/f", strings.NewReader("content"), nil)
	require.NoError(t, <-deleted, "the DELETE of the new directories")
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	require.Equal(t, int32(2), calls.Load(), "the parents were made twice")
	b, err := os.ReadFile(filepath.Join(d.root, "top", "sub", "f"))
	require.NoError(t, err)
	require.Equal(t, "content", string(b))
}

// TestFilesPutParentsKeptRemoved: a PUT whose directory is removed each
// time it is made gives up, 409 CONFLICT saying so, and leaves nothing.
func TestFilesPutParentsKeptRemoved(t *testing.T) {
	d := serve(t, Options{})
	d.srv.parentsMade = func(string) { _ = os.RemoveAll(filepath.Join(d.root, "top")) }
	code, _, body := d.do(t, "PUT", "/v1/files/top/sub/f", strings.NewReader("content"), nil)
	require.Equal(t, http.StatusConflict, code, "%s", body)
	e := apiError(t, body)
	require.Equal(t, "CONFLICT", e.Code)
	require.Contains(t, e.Message, "was removed while the file was written")
	require.NoDirExists(t, filepath.Join(d.root, "top"))
}

// TestFilesPutRootMissing: a PUT while the sandbox root itself is missing
// (a process in the sandbox removed it) answers 404 NOT_FOUND saying so,
// and makes nothing: the root is never made. It answered 409 CONFLICT,
// "send the PUT again", which met the same each time.
func TestFilesPutRootMissing(t *testing.T) {
	d := serve(t, Options{})
	var made atomic.Int32
	d.srv.parentsMade = func(string) { made.Add(1) }
	require.NoError(t, os.Remove(d.root))
	for _, p := range []string{"f", "top/sub/f"} {
		code, _, body := d.do(t, "PUT", "/v1/files/"+p, strings.NewReader("content"), nil)
		require.Equal(t, http.StatusNotFound, code, "%s: %s", p, body)
		e := apiError(t, body)
		require.Equal(t, "NOT_FOUND", e.Code)
		require.Contains(t, e.Message, "the sandbox root does not exist")
	}
	require.Zero(t, made.Load(), "no parents were made")
	require.NoDirExists(t, d.root)
}

// upload starts a PUT of path whose body is the returned pipe, and returns
// a channel that gets its status (0 when the request failed).
func (d *daemon) upload(t *testing.T, path string) (*io.PipeWriter, <-chan int) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, err := http.NewRequestWithContext(ctx(t), "PUT", d.rest+path, pr)
	require.NoError(t, err)
	req.ContentLength = 1 << 20
	done := make(chan int, 1)
	go func() {
		resp, err := d.http.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return pw, done
}

// TestFilesPutDirectoryRemovedMidWrite: the directory of an upload in
// progress is removed (its temporary file, unnamed, does not keep it); once the body has come,
// the PUT answers 409 CONFLICT, as the body cannot be written again. It
// answered 404, for a path it creates.
func TestFilesPutDirectoryRemovedMidWrite(t *testing.T) {
	d := serve(t, Options{})
	sub := filepath.Join(d.root, "top", "sub")
	pw, done := d.upload(t, "/v1/files/top/sub/f")
	_, err := pw.Write([]byte(strings.Repeat("x", 1000)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return unnamedIn(t, sub) == 1 }, 20*time.Second, 5*time.Millisecond,
		"the temporary file is created")
	code, err := d.deleteAll("/v1/files/top")
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	_, err = pw.Write([]byte(strings.Repeat("x", 1<<20-1000)))
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, <-done)
	require.NoDirExists(t, filepath.Join(d.root, "top"))
}

// TestFilesFailedPutRemovesItsParents: an upload cut off leaves none of the
// directories it made, but keeps those that were there before it and
// those another writer filled meanwhile. They were all left behind.
func TestFilesFailedPutRemovesItsParents(t *testing.T) {
	d := serve(t, Options{})
	keep := filepath.Join(d.root, "keep")
	require.NoError(t, os.Mkdir(keep, 0o755))
	pw, done := d.upload(t, "/v1/files/keep/a/b/c/f")
	_, err := pw.Write([]byte(strings.Repeat("x", 1000)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return unnamedIn(t, filepath.Join(keep, "a", "b", "c")) == 1 }, 20*time.Second, 5*time.Millisecond,
		"the temporary file is created")
	code, _, body := d.do(t, "PUT", "/v1/files/keep/a/other", strings.NewReader("other"), nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	pw.CloseWithError(errors.New("cut off"))
	require.Equal(t, 0, <-done)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(keep, "a", "b"))
		return errors.Is(err, os.ErrNotExist)
	}, 20*time.Second, 5*time.Millisecond, "the directories the failed PUT made are removed")
	require.FileExists(t, filepath.Join(keep, "a", "other"), "a directory another writer filled stays")
	require.DirExists(t, keep)
}

// smallFS mounts a tmpfs with opts (its size, its inodes) on a new
// directory, unmounted when the test ends, and returns the directory; the
// test is skipped where it may not mount (not root). mount(2) itself: the
// test process reaps its children (see TestMain), which mount(8) run by
// os/exec would make fail.
func smallFS(t *testing.T, opts string) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { require.NoError(t, unix.Unmount(dir, 0), "unmount %s", dir) })
	return dir
}

// TestFilesPutNoRoom: a PUT the file system has no room for (its bytes,
// its inodes) answers 507 RESOURCE_EXHAUSTED, as the gRPC surface answers
// a start short of room, naming the path written and saying why, and
// leaves the old file, no temporary file and none of the parents it made.
// It answered 500 INTERNAL naming the temporary file on disk ("write:
// write ROOT/a/b/.: no space left on device").
func TestFilesPutNoRoom(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named temporary %v", named), func(t *testing.T) {
			for _, tc := range []struct {
				name, opts, path string
				body             int
			}{
				{"bytes", "size=64k", "a/b/big", 256 << 10},
				{"bytes beside the old file", "size=64k", "old", 256 << 10},
				// The root, the old file and one more: no inode for
				// the parents or the temporary file.
				{"inodes", "size=1m,nr_inodes=3", "a/b/f", 10},
				{"inodes beside the old file", "size=1m,nr_inodes=2", "old", 10},
			} {
				t.Run(tc.name, func(t *testing.T) {
					d := serve(t, Options{Root: smallFS(t, tc.opts)})
					d.srv.namedTemporary = named
					require.NoError(t, os.WriteFile(filepath.Join(d.root, "old"), []byte("old"), 0o644))
					code, _, body := d.do(t, "PUT", "/v1/files/"+tc.path, strings.NewReader(strings.Repeat("x", tc.body)), nil)
					require.Equal(t, http.StatusInsufficientStorage, code, "%s", body)
					e := apiError(t, body)
					require.Equal(t, "RESOURCE_EXHAUSTED", e.Code)
					require.Contains(t, e.Message, fmt.Sprintf("no room to write %q", tc.path))
					require.Contains(t, e.Message, "no space left on device")
					require.NotContains(t, e.Message, tempPrefix)
					require.NotContains(t, e.Message, d.root)
					b, err := os.ReadFile(filepath.Join(d.root, "old"))
					require.NoError(t, err)
					require.Equal(t, "old", string(b))
					entries, err := os.ReadDir(d.root)
					require.NoError(t, err)
					require.Len(t, entries, 1, "only the old file: no temporary file, no parent made")
					require.Zero(t, unnamedIn(t, d.root), "no unnamed temporary file held")
				})
			}
		})
	}
}

// TestFilesPutNearLengthLimits: a name of 255 bytes (NAME_MAX) and a path
// of 4095 bytes as sent (PATH_MAX) are written, read and removed, the
// temporary file unnamed or named (whose name, in the same directory, is
// never what refuses them), though under the root's path the file's path
// on disk is longer than 4095 bytes; a name of 256 bytes and a path of 4096
// are refused 400, the message saying which limit. The path was counted on
// disk, the root's path before it: one the kernel takes as sent, relative
// to the root, was refused, and how long a path could be depended on where
// the root was.
func TestFilesPutNearLengthLimits(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named temporary %v", named), func(t *testing.T) {
			d := serve(t, Options{})
			d.srv.namedTemporary = named
			dirs := strings.Repeat(strings.Repeat("d", 200)+"/", 20)
			sent := func(n int) string { // a path of n bytes
				return dirs + strings.Repeat("f", n-len(dirs))
			}
			for _, p := range []string{strings.Repeat("n", 255), sent(4095)} {
				code, _, body := d.do(t, "PUT", "/v1/files/"+p, strings.NewReader("content"), nil)
				require.Equal(t, http.StatusNoContent, code, "%d bytes: %s", len(p), body)
				code, _, body = d.do(t, "GET", "/v1/files/"+p, nil, nil)
				require.Equal(t, http.StatusOK, code)
				require.Equal(t, "content", string(body))
				dir := filepath.Dir(filepath.Join(d.root, p))
				require.Empty(t, temporaries(t, dir))
				code, _, body = d.do(t, "DELETE", "/v1/files/"+p, nil, nil)
				require.Equal(t, http.StatusNoContent, code, "%s", body)
			}
			require.Greater(t, len(filepath.Join(d.root, sent(4095))), 4095, "longer on disk than PATH_MAX")
			code, _, body := d.do(t, "GET", "/v1/files/"+dirs, nil, nil)
			require.Equal(t, http.StatusOK, code, "%s", body)
			var listing DirectoryListing
			require.NoError(t, json.Unmarshal(body, &listing))
			require.Equal(t, "/"+dirs, listing.Path)
			require.Empty(t, listing.Entries)
			for _, c := range []struct{ path, limit string }{
				{strings.Repeat("n", 256), "a name in it is 256 bytes, over 255 (NAME_MAX)"},
				{sent(4096), "it is 4096 bytes, over 4095 (PATH_MAX)"},
			} {
				for _, method := range []string{"PUT", "GET", "DELETE"} {
					code, _, body := d.do(t, method, "/v1/files/"+c.path, strings.NewReader("content"), nil)
					require.Equal(t, http.StatusBadRequest, code, "%s %d bytes: %s", method, len(c.path), body)
					e := apiError(t, body)
					require.Equal(t, "INVALID_ARGUMENT", e.Code)
					require.True(t, strings.HasSuffix(e.Message, c.limit), "%s: %s", method, e.Message)
				}
			}
			require.Empty(t, temporaries(t, filepath.Dir(filepath.Join(d.root, sent(4095)))))
		})
	}
}
