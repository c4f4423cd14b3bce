package sandboxd

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conchsh/conch/internal/fdtest"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// A start the daemon has no descriptors left for is RESOURCE_EXHAUSTED,
// saying which limit, as conch's API answers it 429: it was INTERNAL
// ("start: stderr pipe: pipe2: too many open files"), a fault of the
// daemon's for a client, which a retry once other work has ended mends.
//
// The descriptors are counted out in a process of the test's own: the
// limit applies to the whole process.
func TestStartOutOfDescriptors(t *testing.T) {
	t.Parallel()
	out := reapertest.RunChild(t, "TestStartOutOfDescriptorsChild", "CONCH_TEST_FD_CHILD=1")
	require.Contains(t, out, "refused after ", "%s", out)
}

func TestStartOutOfDescriptorsChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_FD_CHILD") == "" {
		t.Skip("run by TestStartOutOfDescriptors")
	}
	d := serve(t, Options{})
	c := ctx(t)
	// One process started and ended first: the descriptors the runtime
	// and the gRPC connection keep exist before the count.
	stream, err := d.grpc.Start(c, &sandboxdpb.StartRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"true"}}})
	require.NoError(t, err)
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	restore := fdtest.LimitAbove(t, 24)
	defer restore()
	cctx, cancel := context.WithCancel(c)
	defer cancel() // ends the streams: their processes are killed
	for i := range 24 {
		st, err := d.grpc.Start(cctx, &sandboxdpb.StartRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"sleep", "60"}}})
		if err == nil {
			_, err = st.Recv() // the start event, or the refusal
		}
		if err != nil {
			restore()
			s, _ := status.FromError(err)
			require.Equal(t, codes.ResourceExhausted, s.Code(), "start %d: %v", i, err)
			require.Contains(t, s.Message(), "RLIMIT_NOFILE")
			t.Logf("refused after %d starts: %v", i, err)
			return
		}
	}
	t.Fatal("24 starts went with descriptors for about 24")
}

// A file request the daemon has no descriptor left for answers 429
// RESOURCE_EXHAUSTED saying which limit, as a start does (above): it
// answered 500 INTERNAL with the open's error ("openat f: too many open
// files"), a fault of the daemon's, which a retry once other work has
// ended mends. Counted out in a process of the test's own, as above.
func TestFilesOutOfDescriptors(t *testing.T) {
	t.Parallel()
	out := reapertest.RunChild(t, "TestFilesOutOfDescriptorsChild", "CONCH_TEST_FD_CHILD=1")
	require.Contains(t, out, "DELETE /v1/files/f refused: ", "%s", out)
}

func TestFilesOutOfDescriptorsChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_FD_CHILD") == "" {
		t.Skip("run by TestFilesOutOfDescriptors")
	}
	d := serve(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "f"), []byte("x"), 0o644))
	// The client's connection is open before the count, and kept.
	code, _, body := d.do(t, "GET", "/v1/files/f", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	restoreLimit := fdtest.LimitAbove(t, 64)
	held := fdtest.Fill(t) // every descriptor under the limit taken
	restore := func() {
		fdtest.Close(held)
		held = nil
		restoreLimit()
	}
	defer restore()
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/files/f", ""},
		{"PUT", "/v1/files/g", "y"},
		{"GET", "/v1/files/", ""},
		{"DELETE", "/v1/files/f", ""},
	} {
		code, h, body := d.do(t, req.method, req.path, strings.NewReader(req.body), nil)
		require.Equal(t, http.StatusTooManyRequests, code, "%s %s: %s", req.method, req.path, body)
		e := apiError(t, body)
		require.Equal(t, "RESOURCE_EXHAUSTED", e.Code, "%s %s", req.method, req.path)
		require.Contains(t, e.Message, "RLIMIT_NOFILE", "%s %s", req.method, req.path)
		require.NotContains(t, e.Message, d.root, "%s %s", req.method, req.path)
		require.Equal(t, "1", h.Get("Retry-After"), "%s %s", req.method, req.path)
		t.Logf("%s %s refused: %s", req.method, req.path, e.Message)
	}
	restore()
	code, _, body = d.do(t, "GET", "/v1/files/f", nil, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.NoFileExists(t, filepath.Join(d.root, "g"))
}
