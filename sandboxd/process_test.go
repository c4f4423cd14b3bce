package sandboxd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// started is what a Start stream said, in order.
type started struct {
	id             int32
	stdout, stderr bytes.Buffer
	exit           *int32
	order          []string // "init", "stdout", "stderr", "exit"
}

// drain reads a Start stream to its end and requires init first and exit
// last, each once.
func drain(t *testing.T, stream sandboxdpb.ProcessService_StartClient) *started {
	t.Helper()
	return drainFrom(t, stream, &started{})
}

// drainRest is drain for a stream whose init was read already.
func drainRest(t *testing.T, stream sandboxdpb.ProcessService_StartClient) *started {
	t.Helper()
	return drainFrom(t, stream, &started{order: []string{"init"}})
}

func drainFrom(t *testing.T, stream sandboxdpb.ProcessService_StartClient, r *started) *started {
	t.Helper()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch ev := msg.GetEvent().(type) {
		case *sandboxdpb.StartResponse_Init:
			r.id = ev.Init.GetProcessId()
			r.order = append(r.order, "init")
		case *sandboxdpb.StartResponse_Stdout:
			r.stdout.Write(ev.Stdout)
			r.order = append(r.order, "stdout")
		case *sandboxdpb.StartResponse_Stderr:
			r.stderr.Write(ev.Stderr)
			r.order = append(r.order, "stderr")
		case *sandboxdpb.StartResponse_Exit:
			c := ev.Exit.GetExitCode()
			r.exit = &c
			r.order = append(r.order, "exit")
		}
	}
	require.NotEmpty(t, r.order)
	require.Equal(t, "init", r.order[0], "init comes first")
	require.Equal(t, "exit", r.order[len(r.order)-1], "exit comes last")
	require.NotContains(t, r.order[1:len(r.order)-1], "init")
	require.NotContains(t, r.order[1:len(r.order)-1], "exit")
	return r
}

// initOf reads a Start stream's first event, which must be init.
func initOf(t *testing.T, stream sandboxdpb.ProcessService_StartClient) int32 {
	t.Helper()
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.NotNil(t, msg.GetInit(), "the first event is init")
	return msg.GetInit().GetProcessId()
}

func cfg(argv ...string) *sandboxdpb.ProcessConfig {
	return &sandboxdpb.ProcessConfig{Command: argv}
}

func TestExecuteEcho(t *testing.T) {
	d := serve(t, Options{})
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("echo", "hello")})
	require.NoError(t, err)
	require.Equal(t, int32(0), resp.GetExitCode())
	require.Equal(t, "hello\n", string(resp.GetStdout()))
	require.Empty(t, resp.GetStderr())
}

func TestExecuteExitCodeAndStderr(t *testing.T) {
	d := serve(t, Options{})
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("sh", "-c", "echo oops >&2; exit 3")})
	require.NoError(t, err)
	require.Equal(t, int32(3), resp.GetExitCode())
	require.Equal(t, "oops\n", string(resp.GetStderr()))
}

func TestExecuteStdinIsEmpty(t *testing.T) {
	d := serve(t, Options{})
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("cat")})
	require.NoError(t, err, "cat reads end-of-file at once")
	require.Equal(t, int32(0), resp.GetExitCode())
}

func TestExecuteLargeOutputWhole(t *testing.T) {
	d := serve(t, Options{})
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("head", "-c", "3000000", "/dev/zero")})
	require.NoError(t, err)
	require.Len(t, resp.GetStdout(), 3000000)
}

// TestExecuteOutputOverRetention runs a command whose output is more than a
// log keeps: Execute fails with RESOURCE_EXHAUSTED, naming the exit code,
// and answers interleaved stdout and stderr just under it whole. It once
// answered such an output with bytes left out of its middle and exit 0
// (15.6 of 20 MB).
func TestExecuteOutputOverRetention(t *testing.T) {
	d := serve(t, Options{LogRetention: 1 << 20})
	_, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("sh", "-c", "head -c 3000000 /dev/zero; exit 4")})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, err.Error(), "exit code 4")
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("sh", "-c",
		"i=0; while [ $i -lt 300 ]; do head -c 1000 /dev/zero; echo; head -c 500 /dev/zero >&2; i=$((i+1)); done")})
	require.NoError(t, err)
	require.Len(t, resp.GetStdout(), 300*1001)
	require.Len(t, resp.GetStderr(), 300*500)
}

func TestExecuteEnvAndCwd(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "sub"), 0o755))
	cwd := "sub"
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{
		Command: []string{"sh", "-c", `echo "$SANDBOX_TEST_VAR"; pwd`},
		EnvVars: map[string]string{"SANDBOX_TEST_VAR": "sentinel"},
		Cwd:     &cwd,
	}})
	require.NoError(t, err)
	require.Equal(t, "sentinel\n"+filepath.Join(d.root, "sub")+"\n", string(resp.GetStdout()))

	resp, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("pwd")})
	require.NoError(t, err)
	require.Equal(t, d.root+"\n", string(resp.GetStdout()), "the root is the default cwd")
}

func TestExecuteRefusals(t *testing.T) {
	d := serve(t, Options{})
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(d.root, "out")))
	require.NoError(t, os.Symlink("loop", filepath.Join(d.root, "loop")))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "file"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.root, "noexec"), []byte("#!/bin/sh\n"), 0o644))
	processtest.WriteExecutable(t, filepath.Join(d.root, "noformat"), "echo no #! line\n")
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "sub"), 0o755))
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		cfg  *sandboxdpb.ProcessConfig
		code codes.Code
	}{
		{"no config", nil, codes.InvalidArgument},
		{"no command", &sandboxdpb.ProcessConfig{}, codes.InvalidArgument},
		{"empty program", cfg(""), codes.InvalidArgument},
		{"cwd climbs out", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str("../..")}, codes.PermissionDenied},
		{"cwd through a link out", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str("out")}, codes.PermissionDenied},
		{"cwd missing", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str("nope")}, codes.NotFound},
		{"cwd a file", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str("file")}, codes.InvalidArgument},
		// As REST answers these paths 400: each was INTERNAL.
		{"cwd under a file", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str("file/x")}, codes.InvalidArgument},
		{"cwd with NUL", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str("a\x00b")}, codes.InvalidArgument},
		{"cwd name too long", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: str(strings.Repeat("n", 300))}, codes.InvalidArgument},
		{"program missing", cfg("definitely-not-a-program-here"), codes.NotFound},
		{"program not executable", cfg("./noexec"), codes.PermissionDenied},
		// As execve refuses a directory, EACCES: each was INTERNAL.
		{"program a directory", cfg("./sub"), codes.PermissionDenied},
		{"program an absolute directory", cfg(filepath.Join(d.root, "sub")), codes.PermissionDenied},
		{"program of no format", cfg("./noformat"), codes.FailedPrecondition},
		// As REST answers these paths 400, and as a cwd's: each was INTERNAL.
		{"program under a file", cfg("./file/x"), codes.InvalidArgument},
		{"program through a loop of links", cfg("./loop"), codes.InvalidArgument},
		{"program name too long", cfg("./" + strings.Repeat("n", 300)), codes.InvalidArgument},
		{"env name with =", &sandboxdpb.ProcessConfig{Command: []string{"true"}, EnvVars: map[string]string{"A=B": "c"}}, codes.InvalidArgument},
		// execve's E2BIG, a string over 128 KiB: the request's, not the
		// daemon's failure; it was INTERNAL.
		{"env value over what execve takes", &sandboxdpb.ProcessConfig{Command: []string{"true"}, EnvVars: map[string]string{"BIG": strings.Repeat("v", 200<<10)}}, codes.InvalidArgument},
	} {
		_, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: c.cfg})
		require.Equal(t, c.code, status.Code(err), "Execute: %s: %v", c.name, err)
		stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: c.cfg})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Equal(t, c.code, status.Code(err), "Start: %s: %v", c.name, err)
	}
}

// TestExecuteCwdClimbRefused: a cwd whose .. climbs above the root is
// refused, absolute as relative; the absolute ones ran in ROOT/a instead.
// A root configured as a symlink is named by that path too: it was taken
// for a path under the root, NOT_FOUND.
func TestExecuteCwdClimbRefused(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "rootlink")
	require.NoError(t, os.Symlink(real, link))
	d := serve(t, Options{Root: link})
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "a"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(d.root, "b"), 0o755)) // b/.. is walked: b must be a directory
	for _, cwd := range []string{"../a", "/../a", "//..//a", d.root + "/../../../a", d.root + "/../" + filepath.Base(d.root) + "/a", link + "/../a", "/a/../../a"} {
		config := &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: &cwd}
		_, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: config})
		require.Equal(t, codes.PermissionDenied, status.Code(err), "Execute in %q: %v", cwd, err)
		stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: config})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Equal(t, codes.PermissionDenied, status.Code(err), "Start in %q: %v", cwd, err)
	}
	for _, cwd := range []string{"/a", d.root + "/a", link + "/a", link + "/b/../a"} {
		resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: &cwd}})
		require.NoError(t, err, "in %q", cwd)
		require.Equal(t, filepath.Join(d.root, "a")+"\n", string(resp.GetStdout()), "in %q", cwd)
	}
}

// TestRootMissingIsNotFound: while the sandbox root is missing (a process
// in the sandbox removed it), a process started in it, as every one without
// a cwd is, is NOT_FOUND, whether the cwd is left out or given as "/": left
// out, the engine refused it, INVALID_ARGUMENT ("cwd: stat ROOT: no such
// file or directory"), where "/" was NOT_FOUND.
func TestRootMissingIsNotFound(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.Remove(d.root))
	for _, cwd := range []*string{nil, proto.String("/")} {
		c := &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: cwd}
		_, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: c})
		require.Equal(t, codes.NotFound, status.Code(err), "Execute, cwd %v: %v", cwd, err)
		require.Contains(t, status.Convert(err).Message(), "does not exist in the sandbox")

		stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: c})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Equal(t, codes.NotFound, status.Code(err), "Start, cwd %v: %v", cwd, err)
	}
}

// TestLongInputStatusFitsTrailers checks that a refusal quoting a long
// cwd, program or variable name reaches a client that takes 8 KiB of
// trailers, as gRPC's C-core and Java clients do: its message, which
// quoted the input whole, reset the stream (INTERNAL) instead.
func TestLongInputStatusFitsTrailers(t *testing.T) {
	d := serve(t, Options{})
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithMaxHeaderListSize(8<<10))
	require.NoError(t, err)
	defer conn.Close()
	client := sandboxdpb.NewProcessServiceClient(conn)
	long := strings.Repeat("é", 10<<10)   // 20 KiB, 60 KiB percent-encoded
	missing := strings.Repeat("éé/", 700) // 3.5 KiB: a path the kernel takes
	for _, c := range []struct {
		name string
		cfg  *sandboxdpb.ProcessConfig
		code codes.Code
		ends string
	}{
		{"cwd with NUL", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: proto.String(long + "\x00")}, codes.InvalidArgument, "holds a NUL byte"},
		{"cwd too long", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: proto.String(strings.Repeat(missing, 6))}, codes.InvalidArgument, "it is 21000 bytes, over 4095 (PATH_MAX)"},
		{"cwd missing", &sandboxdpb.ProcessConfig{Command: []string{"pwd"}, Cwd: proto.String(missing)}, codes.NotFound, "does not exist in the sandbox"},
		{"program missing", cfg("/nonexistent/" + missing), codes.NotFound, "no such file or directory"},
		{"env name with =", &sandboxdpb.ProcessConfig{Command: []string{"true"}, EnvVars: map[string]string{long + "=": "x"}}, codes.InvalidArgument, "holds '=' or NUL"},
	} {
		_, err := client.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: c.cfg})
		st := status.Convert(err)
		require.Equal(t, c.code, st.Code(), "Execute: %s: %v", c.name, err)
		require.LessOrEqual(t, len(st.Message()), maxMessage, c.name)
		require.True(t, strings.HasSuffix(st.Message(), c.ends), "%s: %q", c.name, st.Message())
		require.True(t, utf8.ValidString(st.Message()), c.name)

		stream, err := client.Start(ctx(t), &sandboxdpb.StartRequest{Config: c.cfg})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Equal(t, c.code, status.Code(err), "Start: %s: %v", c.name, err)
	}
}

func TestStartStreamsInOrder(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "echo out; echo err >&2; exit 7")})
	require.NoError(t, err)
	r := drain(t, stream)
	require.Positive(t, r.id)
	require.Equal(t, "out\n", r.stdout.String())
	require.Equal(t, "err\n", r.stderr.String())
	require.Equal(t, int32(7), *r.exit)
}

func TestStartChunks(t *testing.T) {
	d := serve(t, Options{StreamChunkSize: 1000})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("head", "-c", "100000", "/dev/zero")})
	require.NoError(t, err)
	var n int
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if b := msg.GetStdout(); b != nil {
			require.LessOrEqual(t, len(b), 1000)
			n += len(b)
		}
	}
	require.Equal(t, 100000, n)
}

// TestWriteStdinLarge writes more than the stdin queue holds in one
// WriteStdin, to a process that reads it slowly: the call waits for room
// and delivers every byte, as upstream's blocking write does. It once
// failed INTERNAL with part of the input delivered.
func TestWriteStdinLarge(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "sleep 0.5; wc -c")})
	require.NoError(t, err)
	id := initOf(t, stream)
	input := bytes.Repeat([]byte("x"), 3<<20)
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Input{Input: input}})
	require.NoError(t, err)
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
	require.NoError(t, err)
	r := drainRest(t, stream)
	require.Equal(t, strconv.Itoa(len(input)), strings.TrimSpace(r.stdout.String()))
	require.Equal(t, int32(0), *r.exit)
}

// Two WriteStdin calls at once each write their input whole, one after
// the other, as writes to upstream's pipe do; each was queued a piece at a
// time as the process read, and the two came out mixed in 1 MiB pieces.
func TestWriteStdinCallsNotMixed(t *testing.T) {
	d := serve(t, Options{})
	out := filepath.Join(d.root, "out")
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "sleep 0.5; cat > "+out)})
	require.NoError(t, err)
	id := initOf(t, stream)
	const size = 3 << 20
	var wg sync.WaitGroup
	for _, b := range []byte("AB") {
		wg.Go(func() {
			_, err := d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id,
				Payload: &sandboxdpb.WriteStdinRequest_Input{Input: bytes.Repeat([]byte{b}, size)}})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
	require.NoError(t, err)
	r := drainRest(t, stream)
	require.Equal(t, int32(0), *r.exit)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Len(t, got, 2*size)
	runs := 1
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1] {
			runs++
		}
	}
	require.Equal(t, 2, runs, "the two inputs came out in %d runs", runs)
}

// A WriteStdin whose call ends before its input is written whole says how
// much of it was (it stays queued for the process).
func TestWriteStdinEndedSaysWhatWent(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sleep", "30")})
	require.NoError(t, err)
	id := initOf(t, stream)
	c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	_, err = d.srv.WriteStdin(c, &sandboxdpb.WriteStdinRequest{ProcessId: id,
		Payload: &sandboxdpb.WriteStdinRequest_Input{Input: bytes.Repeat([]byte("x"), 3<<20)}})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "with 1048576 of its 3145728 bytes of input written")
}

// A Start stream whose client fell more than the log's retention behind
// lost output, which its events cannot say: its trailer says how much.
func TestStartSaysDroppedOutput(t *testing.T) {
	d := serve(t, Options{LogRetention: 64 << 10})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("head", "-c", "4000000", "/dev/zero")})
	require.NoError(t, err)
	initOf(t, stream)
	time.Sleep(time.Second) // the process writes it all meanwhile
	r := drainRest(t, stream)
	require.Equal(t, int32(0), *r.exit)
	require.Less(t, r.stdout.Len(), 4000000)
	dropped := stream.Trailer().Get("conch-output-dropped-bytes")
	require.Len(t, dropped, 1, "trailer %v", stream.Trailer())
	require.Equal(t, strconv.Itoa(4000000-r.stdout.Len()), dropped[0])

	whole, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("echo", "hi")})
	require.NoError(t, err)
	drain(t, whole)
	require.Empty(t, whole.Trailer().Get("conch-output-dropped-bytes"))
}

func TestWriteStdinAndEOF(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("cat")})
	require.NoError(t, err)
	id := initOf(t, stream)
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Input{Input: []byte("piped-through")}})
	require.NoError(t, err)
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
	require.NoError(t, err)
	var out bytes.Buffer
	var exit *int32
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		out.Write(msg.GetStdout())
		if e := msg.GetExit(); e != nil {
			c := e.GetExitCode()
			exit = &c
		}
	}
	require.Equal(t, "piped-through", out.String())
	require.Equal(t, int32(0), *exit)

	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Input{Input: []byte("x")}})
	require.Equal(t, codes.NotFound, status.Code(err), "a process whose stream ended is gone")
}

func TestUnknownProcess(t *testing.T) {
	d := serve(t, Options{})
	_, err := d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: 424242, Payload: &sandboxdpb.WriteStdinRequest_Input{Input: []byte("x")}})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: 424242, Signal: sandboxdpb.Signal_SIGNAL_SIGTERM})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = d.grpc.ResizeTTY(ctx(t), &sandboxdpb.ResizeTTYRequest{ProcessId: 424242, Cols: 80, Rows: 24})
	require.Equal(t, codes.NotFound, status.Code(err))
}

func TestSendSignal(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sleep", "60")})
	require.NoError(t, err)
	id := initOf(t, stream)
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "an unspecified signal")
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id, Signal: sandboxdpb.Signal(1)})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "a signal the API does not name")
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id, Signal: sandboxdpb.Signal_SIGNAL_SIGTERM})
	require.NoError(t, err)
	for {
		msg, err := stream.Recv()
		require.NoError(t, err)
		if e := msg.GetExit(); e != nil {
			require.Equal(t, int32(-1), e.GetExitCode(), "a process a signal ended exits -1, as upstream reports it")
			break
		}
	}
}

// TestSendSignalHandled signals a process that handles the signal and
// exits 143 on its own: it reports 143, its own status (docs/sandboxd.md),
// where it once reported -1 as for a process the signal ended.
func TestSendSignalHandled(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", `trap "exit 143" TERM; echo ready; while :; do sleep 0.05; done`)})
	require.NoError(t, err)
	id := initOf(t, stream)
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(msg.GetStdout()), "the trap is set")
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id, Signal: sandboxdpb.Signal_SIGNAL_SIGTERM})
	require.NoError(t, err)
	r := drainRest(t, stream)
	require.Equal(t, int32(143), *r.exit)
}

// TestSendSignalReachesTheGroup signals a shell whose child runs in the
// background: the child, in the shell's group, ends too.
func TestSendSignalReachesTheGroup(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "sleep 60 & echo $!; wait")})
	require.NoError(t, err)
	id := initOf(t, stream)
	msg, err := stream.Recv()
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(msg.GetStdout())))
	require.NoError(t, err)
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id, Signal: sandboxdpb.Signal_SIGNAL_SIGKILL})
	require.NoError(t, err)
	for {
		if _, err := stream.Recv(); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	require.Eventually(t, func() bool { return syscall.Kill(child, 0) != nil }, 20*time.Second, 20*time.Millisecond,
		"the background child %d got the signal too", child)
}

func TestExitCodeOfAHandledSignal(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "trap 'exit 5' TERM; echo ready; while :; do sleep 0.05; done")})
	require.NoError(t, err)
	id := initOf(t, stream)
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(msg.GetStdout()))
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id, Signal: sandboxdpb.Signal_SIGNAL_SIGTERM})
	require.NoError(t, err)
	r := drainRest(t, stream)
	require.Equal(t, int32(5), *r.exit, "a process that handles the signal and exits reports its own status")
}

func TestResizeWithoutPTY(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sleep", "60")})
	require.NoError(t, err)
	id := initOf(t, stream)
	_, err = d.grpc.ResizeTTY(ctx(t), &sandboxdpb.ResizeTTYRequest{ProcessId: id, Cols: 80, Rows: 24})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	_, err = d.grpc.SendSignal(ctx(t), &sandboxdpb.SendSignalRequest{ProcessId: id, Signal: sandboxdpb.Signal_SIGNAL_SIGKILL})
	require.NoError(t, err)
	require.Equal(t, int32(-1), *drainRest(t, stream).exit)
}

// TestPTYSizeBeforeStart runs stty size on a PTY many times: the size is
// set before the child starts, so it never reads 0 0.
func TestPTYSizeBeforeStart(t *testing.T) {
	d := serve(t, Options{})
	for range 10 {
		stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{
			Config: cfg("sh", "-c", "stty size; tty"),
			Pty:    &sandboxdpb.PTY{Cols: 100, Rows: 30},
		})
		require.NoError(t, err)
		r := drain(t, stream)
		require.Equal(t, int32(0), *r.exit)
		require.True(t, strings.HasPrefix(r.stdout.String(), "30 100\r\n/dev/pts/"), "%q", r.stdout.String())
		require.Empty(t, r.stderr.String(), "a terminal's output is stdout")
	}
}

// TestPTYSizeOverBound: a side over 65535 is refused whatever the other
// is; it was taken, for the default size, when the other was 0.
func TestPTYSizeOverBound(t *testing.T) {
	d := serve(t, Options{})
	for _, size := range []*sandboxdpb.PTY{{Cols: 70000, Rows: 0}, {Cols: 0, Rows: 70000}, {Cols: 70000, Rows: 24}, {Cols: 80, Rows: 70000}} {
		stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "stty size"), Pty: size})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%dx%d: %v", size.GetCols(), size.GetRows(), err)
	}
	// 0 on either side, the other in bounds, is the default size.
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "stty size"), Pty: &sandboxdpb.PTY{Cols: 65535, Rows: 0}})
	require.NoError(t, err)
	r := drain(t, stream)
	require.Equal(t, "24 80\r\n", r.stdout.String())
}

func TestPTYResizeAndInput(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{
		Config: cfg("sh", "-c", "stty -echo; echo ready; read line; stty size; echo \"got $line\""),
		Pty:    &sandboxdpb.PTY{Cols: 80, Rows: 24},
	})
	require.NoError(t, err)
	id := initOf(t, stream)
	var out bytes.Buffer
	for !strings.Contains(out.String(), "ready") {
		msg, err := stream.Recv()
		require.NoError(t, err)
		out.Write(msg.GetStdout())
	}
	_, err = d.grpc.ResizeTTY(ctx(t), &sandboxdpb.ResizeTTYRequest{ProcessId: id, Cols: 120, Rows: 40})
	require.NoError(t, err)
	_, err = d.grpc.ResizeTTY(ctx(t), &sandboxdpb.ResizeTTYRequest{ProcessId: id, Cols: 0, Rows: 40})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Input{Input: []byte("hi\n")}})
	require.NoError(t, err)
	r := drainRest(t, stream)
	require.Contains(t, r.stdout.String(), "40 120\r\ngot hi")
	require.Equal(t, int32(0), *r.exit)
}

func TestPTYEOF(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("cat"), Pty: &sandboxdpb.PTY{Cols: 80, Rows: 24}})
	require.NoError(t, err)
	id := initOf(t, stream)
	_, err = d.grpc.WriteStdin(ctx(t), &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
	require.NoError(t, err)
	require.Equal(t, int32(0), *drainRest(t, stream).exit, "end-of-file on a terminal ends cat")
}

// TestStreamCancelKills cancels a Start stream: the process and its tree
// are killed, as upstream ties a process to its request.
func TestStreamCancelKills(t *testing.T) {
	d := serve(t, Options{})
	c, cancel := context.WithCancel(ctx(t))
	stream, err := d.grpc.Start(c, &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "echo $$; sleep 60")})
	require.NoError(t, err)
	initOf(t, stream)
	msg, err := stream.Recv()
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(msg.GetStdout())))
	require.NoError(t, err)
	cancel()
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 20*time.Second, 20*time.Millisecond)
}

// TestShutdownEndsProcesses shuts the server down under a Start of a
// process that ignores TERM: it is killed within the grace, and its stream
// ends with exit; new processes are refused.
func TestShutdownEndsProcesses(t *testing.T) {
	d := serve(t, Options{StopGrace: 200 * time.Millisecond})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done")})
	require.NoError(t, err)
	initOf(t, stream)
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(msg.GetStdout()))
	sctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	require.NoError(t, d.srv.Shutdown(sctx))
	require.Equal(t, int32(-1), *drainRest(t, stream).exit)
	_, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("true")})
	require.Equal(t, codes.Unavailable, status.Code(err))
}

// TestRESTThenGRPC is upstream's round trip across both surfaces: a file
// written over REST is read by a process, listed, and deleted.
func TestRESTThenGRPC(t *testing.T) {
	d := serve(t, Options{})
	code, _, _ := d.do(t, "PUT", "/v1/files/notes/hello.txt", strings.NewReader("hello from REST"), nil)
	require.Equal(t, 204, code)
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("cat", "notes/hello.txt")})
	require.NoError(t, err)
	require.Equal(t, "hello from REST", string(resp.GetStdout()))
	resp, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("sh", "-c", "echo made by a process > notes/made.txt")})
	require.NoError(t, err)
	require.Equal(t, int32(0), resp.GetExitCode())
	code, _, body := d.do(t, "GET", "/v1/files/notes/made.txt", nil, nil)
	require.Equal(t, 200, code)
	require.Equal(t, "made by a process\n", string(body))
	code, _, _ = d.do(t, "DELETE", "/v1/files/notes?recursive=true", nil, nil)
	require.Equal(t, 204, code)
	code, _, _ = d.do(t, "GET", "/v1/files/notes/hello.txt", nil, nil)
	require.Equal(t, 404, code)
}

// TestWorkCountsCalls checks Options.Work, which a draining daemon counts
// calls with: a Start stream is counted until its exit was sent, however
// long before its process ended, and a call Work refuses with
// ErrUnavailable is UNAVAILABLE.
func TestWorkCountsCalls(t *testing.T) {
	var mu sync.Mutex
	inFlight, refuse := 0, false
	d := serve(t, Options{Work: func() (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return nil, fmt.Errorf("%w: draining", ErrUnavailable)
		}
		inFlight++
		return sync.OnceFunc(func() { mu.Lock(); inFlight--; mu.Unlock() }), nil
	}})
	counted := func() int { mu.Lock(); defer mu.Unlock(); return inFlight }
	// More output than the flow-control windows hold: the stream waits
	// for the client to read, with its process ended.
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("head", "-c", "4000000", "/dev/zero")})
	require.NoError(t, err)
	st, err := d.srv.lookup(initOf(t, stream))
	require.NoError(t, err)
	<-st.p.Done()
	require.Equal(t, 1, counted(), "a stream whose process ended and whose exit is not sent yet")
	r := drainRest(t, stream)
	require.Equal(t, 4000000, r.stdout.Len())
	require.Equal(t, int32(0), *r.exit)
	require.Eventually(t, func() bool { return counted() == 0 }, 20*time.Second, 5*time.Millisecond)
	_, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("true")})
	require.NoError(t, err)
	require.Equal(t, 0, counted())

	mu.Lock()
	refuse = true
	mu.Unlock()
	_, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("true")})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	stream, err = d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("true")})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

// TestStartUnreadStream: a Start stream whose client reads none of its
// events is ended once a send of it has waited IOIdle (the stream's
// flow-control window full), its process killed, and DEADLINE_EXCEEDED
// says why once the client reads on. It held the stream, its goroutine
// and its process for as long as the client kept the connection.
func TestStartUnreadStream(t *testing.T) {
	_, err := startUnread(t, "the process of a stream its client does not read runs on", "yes")
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "read none of the stream for 200ms")
}

// startUnread starts args through Start on a daemon whose IOIdle is 200 ms,
// reads the init event and nothing more until the process has ended
// (failing with what when it runs on) and the daemon has let the stream go,
// then reads on to the stream's end: it returns how the process ended, and
// the error the stream ended with. No exit event may come before it. Its
// client's flow-control windows are fixed at 64 KiB (gRPC's default
// otherwise grows them, up to megabytes, as data comes): a few hundred
// KiB of output the client does not read fill what the daemon may send.
func startUnread(t *testing.T, what string, args ...string) (*process.Result, error) {
	t.Helper()
	d := serve(t, Options{IOIdle: 200 * time.Millisecond})
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	defer conn.Close()
	stream, err := sandboxdpb.NewProcessServiceClient(conn).Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg(args...)})
	require.NoError(t, err)
	id := initOf(t, stream)
	st, err := d.srv.lookup(id)
	require.NoError(t, err)
	select {
	case <-st.p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
	require.Eventually(t, func() bool { _, err := d.srv.lookup(id); return err != nil }, 20*time.Second, 10*time.Millisecond,
		"the stream has ended")
	for err == nil {
		var ev *sandboxdpb.StartResponse
		ev, err = stream.Recv()
		require.Nil(t, ev.GetExit(), "no exit event: the daemon ended the stream")
	}
	return st.p.Info().Result, err
}

// TestStartOutlivedByAChild: a child that outlives its Start process and
// keeps its stdout open does not hold the stream: the output is read for
// at most process.DrainDelay (2 s) after the exit, then exit is sent, and
// what the child writes later is not (docs/sandboxd.md says so).
func TestStartOutlivedByAChild(t *testing.T) {
	d := serve(t, Options{})
	stream, err := d.grpc.Start(ctx(t), &sandboxdpb.StartRequest{Config: cfg("sh", "-c", "(sleep 30; echo late) & echo $!")})
	require.NoError(t, err)
	r := drain(t, stream)
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout.String()))
	require.NoError(t, err, "%q", r.stdout.String())
	defer syscall.Kill(pid, syscall.SIGKILL)
	require.NoError(t, syscall.Kill(pid, 0), "the child still runs, its stdout open, when the stream has ended")
	require.Equal(t, int32(0), *r.exit)
	require.NotContains(t, r.stdout.String(), "late")
}

// TestStartUnreadStreamOfEndedProcess: a Start stream whose process ended
// by itself, and whose client read none of its output, is ended as any
// unread stream is, and DEADLINE_EXCEEDED does not say that the process
// was killed: it exited 0, and nothing killed it.
//
// The process ends before any of its output is written: a child it leaves
// writes a megabyte once the process is gone (reaped: kill -0 fails), read
// into the log as a child's output is for process.DrainDelay after the
// exit. So the stream's events wait unread only once the process has
// ended, however slow the machine: a process that wrote them itself had to
// end within IOIdle of the client's window filling, or be killed as one
// that ran on.
func TestStartUnreadStreamOfEndedProcess(t *testing.T) {
	r, err := startUnread(t, "the process or its child did not end", "sh", "-c",
		`(while kill -0 $$ 2>/dev/null; do sleep 0.01; done; exec head -c 1000000 /dev/zero) &`)
	require.Equal(t, int32(0), exitCode(r), "it ended by itself")
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	msg := status.Convert(err).Message()
	require.Contains(t, msg, "read none of the stream for 200ms")
	require.NotContains(t, msg, "was killed", "the process exited by itself")
}

// A program named with a relative path is the file the kernel finds from
// the cwd, as upstream's execve finds it: "lnk/../which.sh" from where the
// link leads, and "myprog/" refused INVALID_ARGUMENT (not a directory),
// where the path cleaned as text ran another file, or ran myprog.
func TestExecuteRelativeProgramUncleaned(t *testing.T) {
	d := serve(t, Options{})
	require.NoError(t, os.MkdirAll(filepath.Join(d.root, "sub", "inner"), 0o755))
	for path, says := range map[string]string{"which.sh": "root", "sub/which.sh": "sub", "myprog": "myprog"} {
		require.NoError(t, os.WriteFile(filepath.Join(d.root, path), []byte("#!/bin/sh\necho "+says+"\n"), 0o755))
	}
	require.NoError(t, os.Symlink("sub/inner", filepath.Join(d.root, "lnk")))
	resp, err := d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg("./lnk/../which.sh")})
	require.NoError(t, err)
	require.Equal(t, "sub\n", string(resp.GetStdout()))
	resp, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{
		Command: []string{"which.sh"}, EnvVars: map[string]string{"PATH": "lnk/.."}}})
	require.NoError(t, err)
	require.Equal(t, "sub\n", string(resp.GetStdout()), "a relative PATH entry")
	for _, prog := range []string{"./myprog/", "./myprog/.", "myprog/"} {
		_, err = d.grpc.Execute(ctx(t), &sandboxdpb.ExecuteRequest{Config: cfg(prog)})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", prog, err)
		require.ErrorContains(t, err, "not a directory", prog)
	}
}
