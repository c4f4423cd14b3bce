package sandboxd

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// swapTree is a root whose directory d is swapped, in a tight loop, with
// l, a symlink to a directory outside the root (renameat2 with
// RENAME_EXCHANGE: d is always the one or the other), and the outside
// directory. Both directories hold a file f; outside holds files victim
// and only-outside as well.
type swapTree struct {
	d       *daemon
	outside string
}

const outsideBytes = "OUTSIDE-BYTES"

func newSwapTree(t *testing.T) *swapTree {
	d := serve(t, Options{})
	outside := t.TempDir()
	for _, name := range []string{"f", "victim", "only-outside"} {
		require.NoError(t, os.WriteFile(filepath.Join(outside, name), []byte(outsideBytes), 0o644))
	}
	dir := filepath.Join(d.root, "d")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("inside"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(d.root, "l")))
	return &swapTree{d: d, outside: outside}
}

// swap exchanges d and l until stop is closed.
func (s *swapTree) swap(stop <-chan struct{}) error {
	d, l := filepath.Join(s.d.root, "d"), filepath.Join(s.d.root, "l")
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE); err != nil {
			return err
		}
	}
}

// putBack creates the file victim again in dir, the directory that d and
// l take turns naming, through a descriptor of it.
func putBack(dir *os.File) {
	if fd, err := unix.Openat(int(dir.Fd()), "victim", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644); err == nil {
		unix.Close(fd)
	}
}

// race sends requests made by req to the handler, from two goroutines,
// while d is swapped, until check says an answer, or the outside
// directory, shows a byte from outside the root (a failure), or for 2 s.
func (s *swapTree) race(t *testing.T, req func() *http.Request, check func(*httptest.ResponseRecorder) error) {
	deadline := time.Now().Add(2 * time.Second)
	stop := make(chan struct{})
	swapped := make(chan error, 1)
	go func() { swapped <- s.swap(stop) }()
	h := s.d.srv.Handler()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var statuses sync.Map
	for range 2 {
		wg.Go(func() {
			for time.Now().Before(deadline) && len(errs) == 0 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req())
				statuses.Store(rec.Code, rec.Body.String())
				if err := check(rec); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-swapped)
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	var seen []int
	statuses.Range(func(k, v any) bool { seen = append(seen, k.(int)); t.Log(k, v); return true })
	t.Logf("statuses answered: %v", seen)
}

// TestFilesSwappedDirectoryStaysBeneath: a process in the sandbox swaps a
// directory on a request's path for a symlink to outside the root, in a
// tight loop, while GETs, PUTs and DELETEs run. No answer carries a byte
// or a name from outside, and nothing outside is written or removed: the
// check that the path stays under the root and the operation are one.
// Each was raced: the path was checked while d was the directory, then
// opened (or written, or removed) by name once d was the link.
func TestFilesSwappedDirectoryStaysBeneath(t *testing.T) {
	leaked := func(rec *httptest.ResponseRecorder) error {
		if b := rec.Body.Bytes(); bytes.Contains(b, []byte(outsideBytes)) || bytes.Contains(b, []byte("only-outside")) {
			return errors.New("an answer holds what is outside the root: " + string(b))
		}
		return nil
	}
	t.Run("GET", func(t *testing.T) {
		s := newSwapTree(t)
		s.race(t, func() *http.Request { return httptest.NewRequest("GET", "/v1/files/d/f", nil) }, leaked)
	})
	t.Run("listing", func(t *testing.T) {
		s := newSwapTree(t)
		s.race(t, func() *http.Request { return httptest.NewRequest("GET", "/v1/files/d", nil) }, leaked)
	})
	t.Run("PUT", func(t *testing.T) {
		s := newSwapTree(t)
		s.race(t, func() *http.Request {
			return httptest.NewRequest("PUT", "/v1/files/d/sub/new", strings.NewReader("written"))
		}, func(*httptest.ResponseRecorder) error {
			for _, name := range []string{"new", "sub"} {
				if _, err := os.Lstat(filepath.Join(s.outside, name)); err == nil {
					return errors.New("a PUT wrote outside the root: " + name)
				}
			}
			return nil
		})
	})
	t.Run("DELETE", func(t *testing.T) {
		s := newSwapTree(t)
		dir, err := os.Open(filepath.Join(s.d.root, "d"))
		require.NoError(t, err)
		defer dir.Close()
		s.race(t, func() *http.Request {
			// Put back what the last DELETE removed inside:
			// every DELETE has something to remove.
			putBack(dir)
			return httptest.NewRequest("DELETE", "/v1/files/d/victim", nil)
		}, func(*httptest.ResponseRecorder) error {
			if _, err := os.Lstat(filepath.Join(s.outside, "victim")); err != nil {
				return errors.New("a DELETE removed a file outside the root")
			}
			return nil
		})
	})
}
