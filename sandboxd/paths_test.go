package sandboxd

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// TestWalkDirectoryRemovedMeanwhile: a directory of the path removed
// between the walk's look at it and its open is missing, as one that was
// never there is: GET and DELETE answer 404 and a cwd NOT_FOUND, where
// they answered 409 CONFLICT and ABORTED ("changed", send it again, which
// met the same 404), and a PUT makes it again with the file's parents. One
// swapped for a symlink meanwhile is still a path that changed (409).
func TestWalkDirectoryRemovedMeanwhile(t *testing.T) {
	d := serve(t, Options{})
	sub := filepath.Join(d.root, "a", "b")
	var (
		mu   sync.Mutex
		once func(dir string) // done to sub at the next look, then cleared
	)
	d.srv.looked = func(dir string) {
		mu.Lock()
		defer mu.Unlock()
		if dir == sub && once != nil {
			once(dir)
			once = nil
		}
	}
	at := func(f func(dir string)) {
		require.NoError(t, os.MkdirAll(sub, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sub, "f"), []byte("old"), 0o644))
		mu.Lock()
		once = f
		mu.Unlock()
	}
	remove := func(dir string) {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	}
	for _, method := range []string{"GET", "HEAD", "DELETE"} {
		at(remove)
		code, _, body := d.do(t, method, "/v1/files/a/b/f", nil, nil)
		require.Equal(t, http.StatusNotFound, code, "%s: %s", method, body)
		if method != "HEAD" {
			e := apiError(t, body)
			require.Equal(t, codeNotFound, e.Code)
			require.Contains(t, e.Message, "does not exist")
		}
		require.NoDirExists(t, sub)
	}

	at(remove)
	_, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: proto.String("a/b")}})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	at(remove)
	code, _, body := d.do(t, "PUT", "/v1/files/a/b/f", strings.NewReader("new"), nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	b, err := os.ReadFile(filepath.Join(sub, "f"))
	require.NoError(t, err)
	require.Equal(t, "new", string(b))

	at(func(dir string) {
		remove(dir)
		if err := os.Symlink("/", dir); err != nil {
			t.Error(err)
		}
	})
	code, _, body = d.do(t, "GET", "/v1/files/a/b/f", nil, nil)
	require.Equal(t, http.StatusConflict, code, "%s", body)
	require.NoError(t, os.Remove(sub))
}

// TestCwdTooLongOnDisk: a cwd the kernel cannot enter because its path on
// disk, under the root's path, is over 4095 bytes (PATH_MAX), though as
// sent it is not, is refused INVALID_ARGUMENT with a message that says the
// limit, how long the path on disk is, that path (its middle left out),
// and what to do instead; it said only that "the path on disk" was over
// PATH_MAX.
func TestCwdTooLongOnDisk(t *testing.T) {
	d := serve(t, Options{})
	dirs := strings.Repeat(strings.Repeat("d", 200)+"/", 20) + strings.Repeat("e", 70) + "/"
	code, _, body := d.do(t, "PUT", "/v1/files/"+dirs+"f", strings.NewReader("f"), nil)
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	disk := filepath.Join(d.root, dirs)
	require.Greater(t, len(disk), pathMax)
	require.LessOrEqual(t, len(dirs), pathMax)

	_, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: proto.String(dirs)}})
	st := status.Convert(err)
	require.Equal(t, codes.InvalidArgument, st.Code(), "%v", err)
	m := st.Message()
	require.Less(t, len(m), maxMessage, "%s", m)
	require.Contains(t, m, fmt.Sprintf("is %d bytes, over 4095 (PATH_MAX)", len(disk)))
	require.Contains(t, m, `"`+d.root+"/ddd", "the path on disk, its start")
	require.Contains(t, m, `ee"`, "the path on disk, its end")
	require.Contains(t, m, "bytes left out")
	require.True(t, strings.HasSuffix(m, "or start the process in a directory above it and have it cd there by a relative path"), "%s", m)
}
