package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// readUntil reads from r until the bytes read contain want.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, 1024)
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		require.NoError(t, err, "read so far: %q", got.String())
	}
	return got.String()
}

func TestAttach(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{
		Kind: process.KindPTY,
		Cmd:  `echo before; while read -r line; do [ "$line" = size ] && stty size; [ "$line" = bye ] && exit 5; echo "got:$line"; done`,
	})
	require.NoError(t, err)
	// Wait for the first output, so that attaching must replay it.
	require.Eventually(t, func() bool {
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		return err == nil && len(page.Items) > 0
	}, 10e9, 10e6)

	a, err := d.c.Attach(c, p.ID)
	require.NoError(t, err)
	defer a.Close()
	readUntil(t, a, "before")

	_, err = a.Write([]byte("hello\n"))
	require.NoError(t, err)
	readUntil(t, a, "got:hello")

	require.NoError(t, a.Resize(c, 91, 37))
	_, err = a.Write([]byte("size\n"))
	require.NoError(t, err)
	readUntil(t, a, "37 91")

	_, err = a.Write([]byte("bye\n"))
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, a)
	require.NoError(t, err, "the attachment ends cleanly with the process")
	r, _, err := d.c.Wait(c, p.ID, 0)
	require.NoError(t, err)
	require.Equal(t, 5, exitCode(t, *r))
}

func TestAttachRefused(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	r := d.run(t, client.StartOptions{Cmd: "true"})
	_, err := d.c.Attach(c, r.ProcessID)
	requireCode(t, err, client.CodeUnsupportedOperation)
	_, err = d.c.Attach(c, "no-such-id")
	requireCode(t, err, client.CodeNotFound)
	other, err := client.New(d.url, "wrong")
	require.NoError(t, err)
	_, err = other.Attach(c, r.ProcessID)
	requireCode(t, err, client.CodeUnauthenticated)
	other.CloseIdleConnections()
}

// TestAttachNonPTYIsConflict: attach to a process that is no PTY is 409
// whether or not the request is a WebSocket handshake: an exec process
// without one was 426, which sent the client to upgrade only to be refused.
func TestAttachNonPTYIsConflict(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	r := d.run(t, client.StartOptions{Cmd: "true"})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	for _, id := range []string{r.ProcessID, s.ID} {
		status, body := d.raw(t, "GET", "/v1/processes/"+id+"/attach", "", authed())
		require.Equal(t, http.StatusConflict, status, body)
		require.Contains(t, body, `"code":"unsupported_operation"`)
	}
	// A PTY process without a handshake is still told to upgrade.
	p, err := d.c.Start(ctx(t), client.StartOptions{Kind: process.KindPTY, Cmd: "true"})
	require.NoError(t, err)
	status, body := d.raw(t, "GET", "/v1/processes/"+p.ID+"/attach", "", authed())
	require.Equal(t, http.StatusUpgradeRequired, status, body)
}

// drainAttach reads a to its end: the digest and count of its bytes, and the
// bytes its gap messages said it missed.
func drainAttach(a *client.Attachment) (sum [32]byte, got, gaps int64, err error) {
	h := sha256.New()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := a.Read(buf)
		h.Write(buf[:n])
		got += int64(n)
		var gap *client.GapError
		switch {
		case errors.As(rerr, &gap):
			gaps += gap.Bytes
		case errors.Is(rerr, io.EOF):
			copy(sum[:], h.Sum(nil))
			return sum, got, gaps, nil
		case rerr != nil:
			return sum, got, gaps, rerr
		}
	}
}

// TestAttachEveryByteOrGap: WebSocket clients attached to a PTY that writes
// far more than the daemon retains each get every byte (the PTY waits for
// them), and a client that attaches once the output is gone is told first
// how many bytes it missed: what it gets and its gaps add up to the total.
func TestAttachEveryByteOrGap(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 256 << 10})
	c := ctx(t)
	const total = 8 << 20
	p, err := d.c.Start(c, client.StartOptions{
		Kind: process.KindPTY,
		Cmd:  fmt.Sprintf("stty raw -echo; printf R; read go; head -c %d /dev/urandom", total),
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		return err == nil && len(page.Items) > 0
	}, 10e9, 10e6)
	type result struct {
		sum       [32]byte
		got, gaps int64
		err       error
	}
	const readers = 6
	results := make([]result, readers)
	var wg sync.WaitGroup
	var first *client.Attachment
	for i := range readers {
		a, err := d.c.Attach(c, p.ID)
		require.NoError(t, err)
		defer a.Close()
		if i == 0 {
			first = a
		}
		wg.Go(func() {
			r := &results[i]
			r.sum, r.got, r.gaps, r.err = drainAttach(a)
		})
	}
	_, err = first.Write([]byte("\n"))
	require.NoError(t, err)
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.err, "reader %d", i)
		require.Equal(t, int64(total+1), r.got, "reader %d's bytes", i)
		require.Zero(t, r.gaps, "reader %d's gaps", i)
		require.Equal(t, results[0].sum, r.sum, "reader %d's digest", i)
	}
	late, err := d.c.Attach(c, p.ID)
	require.NoError(t, err)
	defer late.Close()
	_, got, gaps, err := drainAttach(late)
	require.NoError(t, err)
	require.Positive(t, gaps, "the late reader was told of no gap")
	require.Equal(t, int64(total+1), got+gaps, "the late reader's bytes and gaps")
}

// TestAttachInputNotReadEndsWithClient: a client that typed more than the
// program reads and then went away ends its attachment, which waits no
// longer to hand the program the rest: the handler does not outlive the
// client until the program reads or ends.
// It runs alone: it counts the attachments' goroutines.
func TestAttachInputNotReadEndsWithClient(t *testing.T) {
	d := start(t, server.Options{})
	server.SetHeartbeat(d.srv, 100*time.Millisecond)
	c := ctx(t)
	p, a := attachNonReader(t, d, c)
	// The client reads on, so that it answers the daemon's pings: a ping
	// unanswered before the daemon began to write the input would end the
	// attachment before its input waits.
	reading := make(chan struct{})
	go func() { defer close(reading); io.Copy(io.Discard, a) }()
	// More than the input queue holds: the daemon's write of it waits.
	_, err := a.Write(make([]byte, 2*process.StdinQueueLimit))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return attachInputs() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the attachment's input waits for the program")
	require.NoError(t, a.Close())
	<-reading
	require.Eventually(t, func() bool { return attachInputs() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the attachment still waits to type into a program that does not read, its client gone")
	got, err := d.c.Get(c, p.ID)
	require.NoError(t, err)
	require.Equal(t, "running", string(got.State))
}

// attachNonReader starts a PTY process that reads none of its input, in
// raw mode, attaches to it once it is so, and deletes it at the test's end.
func attachNonReader(t *testing.T, d *daemon, c context.Context) (*client.Process, *client.Attachment) {
	t.Helper()
	p, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: "stty raw -echo; echo R; exec sleep 600"})
	require.NoError(t, err)
	t.Cleanup(func() { d.c.Delete(context.Background(), p.ID) })
	a, err := d.c.Attach(c, p.ID)
	require.NoError(t, err)
	readUntil(t, a, "R")
	return p, a
}

// attachInputs counts the goroutines of this test binary that copy an
// attachment's input to its terminal.
func attachInputs() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "server.(*Server).attachInput(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestAttachInputHeldKeepsClient: a live client that types more than the
// input queue holds into a program that leaves it unread for several
// heartbeats keeps its attachment: its pongs wait behind the input the
// daemon holds back, and are not taken for a client gone. Once the program
// reads, it gets every byte, in order. With more input than the socket's
// buffers hold besides, the client's own write waits too, longer than the
// 5 s its pong would wait for it: it answers no ping then, rather than
// fail its read.
func TestAttachInputHeldKeepsClient(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		total int
		sleep string
	}{
		{"queue", 3 * process.StdinQueueLimit, "3"},
		{"socket", 24 * process.StdinQueueLimit, "7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testAttachInputHeld(t, tt.total, tt.sleep)
		})
	}
}

func testAttachInputHeld(t *testing.T, total int, sleep string) {
	d := start(t, server.Options{})
	// Still several heartbeats in the program's sleep. A client reading
	// (for R, for the digest) must answer a ping within one: at 200 ms a
	// loaded machine delayed a pong past it, and the daemon ended the
	// attachment before R ("failed to read frame header: EOF").
	const heartbeat = time.Second
	server.SetHeartbeat(d.srv, heartbeat)
	// A hang guard past ctx's 30 s: the program's sleep and 24 MiB typed
	// through a terminal took 9 s on a quiet machine, 18 s on one loaded
	// past 15, and the attachment's read ran out with the digest not yet
	// come on one loaded more.
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Made before the client attaches: a client that neither reads nor
	// writes for a heartbeat is gone.
	input := make([]byte, total)
	for i := range input {
		input[i] = byte('a' + i%26)
	}
	p, err := d.c.Start(c, client.StartOptions{
		Kind: process.KindPTY,
		// The program reads nothing for several heartbeats, then all of it.
		Cmd: fmt.Sprintf("stty raw -echo; printf R; sleep %s; head -c %d | sha256sum", sleep, total),
	})
	require.NoError(t, err)
	t.Cleanup(func() { d.c.Delete(context.Background(), p.ID) })
	a, err := d.c.Attach(c, p.ID)
	require.NoError(t, err)
	defer a.Close()
	readUntil(t, a, "R")
	// As conch attach < file sends it: 32 KiB at a time.
	wrote := make(chan error, 1)
	go func() {
		var err error
		for rest := input; len(rest) > 0 && err == nil; {
			n := min(len(rest), 32<<10)
			_, err = a.Write(rest[:n])
			rest = rest[n:]
		}
		wrote <- err
	}()
	sum := sha256.Sum256(input)
	readUntil(t, a, fmt.Sprintf("%x", sum))
	require.NoError(t, <-wrote)
	_, err = io.Copy(io.Discard, a)
	require.NoError(t, err, "the attachment ends cleanly with the process")
}

// A binary message is typed in as it comes: clients that leave theirs
// unfinished hold no more of the daemon's memory than the program's input
// queue. Read whole before it was typed, each held up to --body-limit,
// outside every budget. Not parallel: it reads the heap of the process.
func TestAttachMessageNotHeldWhole(t *testing.T) {
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: "sleep 60"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	const conns, each = 4, 8 << 20
	payload := bytes.Repeat([]byte("x"), each)
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := heap()
	url := strings.Replace(d.url, "http", "ws", 1) + "/v1/processes/" + p.ID + "/attach"
	for range conns {
		ws, _, err := websocket.Dial(c, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
		require.NoError(t, err)
		defer ws.CloseNow()
		w, err := ws.Writer(c, websocket.MessageBinary)
		require.NoError(t, err)
		go w.Write(payload) // one frame, the message never finished
	}
	require.Never(t, func() bool { return heap()-before > 3*each/2 }, 2*time.Second, 50*time.Millisecond,
		"%d unfinished messages of %d bytes held in the daemon's memory", conns, each)
}

// TestMaxStreamsBoundsAttachments: an attachment takes a stream's place
// under MaxStreams, as it holds what a stream does for as long as its
// client keeps it; past them one more is refused 429 naming the flag, and
// one is served again once another closed. Nothing bounded them but
// --max-connections (4096 idle ones held about half a gigabyte).
func TestMaxStreamsBoundsAttachments(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxStreams: 2})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: "sleep 60"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	url := strings.Replace(d.url, "http", "ws", 1) + "/v1/processes/" + p.ID + "/attach"
	dial := func() (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(c, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	}
	var open []*websocket.Conn
	for range 2 {
		ws, _, err := dial()
		require.NoError(t, err)
		defer ws.CloseNow()
		open = append(open, ws)
	}
	_, resp, err := dial()
	require.Error(t, err, "a third attachment under MaxStreams 2")
	require.NotNil(t, resp)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	require.Contains(t, string(b), "--max-streams")
	open[0].Close(websocket.StatusNormalClosure, "")
	ws, _, err := dial()
	require.NoError(t, err, "an attachment after one closed")
	ws.CloseNow()
}

// TestAttachCloseWithInputUnread: input written to a program that reads
// none waits in the daemon's socket, which the daemon then reads no more
// of, the close frame behind it (or, past what the sockets hold, in a Write
// that waits). Close ends the connection once the daemon has sent nothing
// for 2 s, returns no error, and the process goes on. It waited out the
// library's 5 s and failed, "context deadline exceeded".
func TestAttachCloseWithInputUnread(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, size := range []int{(1 << 20) + (160 << 10), 4 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			c := ctx(t) // the subtest's own: it may wait its turn long
			p, a := attachNonReader(t, d, c)
			wrote := make(chan error, 1)
			go func() {
				_, err := a.Write(make([]byte, size))
				wrote <- err
			}()
			select {
			case err := <-wrote:
				wrote <- err
			case <-time.After(2 * time.Second): // the daemon took what it takes
			}
			closed := make(chan error, 1)
			go func() { closed <- a.Close() }()
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Close still waits 30 s later")
			}
			select {
			case <-wrote:
			case <-time.After(30 * time.Second):
				t.Fatal("the Write still waits 30 s after Close")
			}
			info, err := d.c.Get(c, p.ID)
			require.NoError(t, err)
			require.Equal(t, process.Running, info.State)
		})
	}
}

// attachWS starts a PTY process that writes output without end (zeros, in
// raw mode) and attaches a bare WebSocket client to it, which answers pings
// as it reads. The process is deleted at the test's end.
func attachWS(t *testing.T, d *daemon, c context.Context) *websocket.Conn {
	t.Helper()
	p, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: "stty raw -echo; cat /dev/zero"})
	require.NoError(t, err)
	t.Cleanup(func() { d.c.Delete(context.Background(), p.ID) })
	url := strings.Replace(d.url, "http", "ws", 1) + "/v1/processes/" + p.ID + "/attach"
	ws, _, err := websocket.Dial(c, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	require.NoError(t, err)
	t.Cleanup(func() { ws.CloseNow() })
	ws.SetReadLimit(-1)
	return ws
}

// readFor reads ws's messages for d, taking at most rate bytes a second of
// them, and reports the bytes read.
func readFor(c context.Context, ws *websocket.Conn, d time.Duration, rate int) (int64, error) {
	var got int64
	start := time.Now()
	for time.Since(start) < d {
		_, msg, err := ws.Read(c)
		if err != nil {
			return got, err
		}
		got += int64(len(msg))
		// Ahead of the rate: wait until it catches up.
		if ahead := time.Duration(got)*time.Second/time.Duration(rate) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return got, nil
}

// TestAttachSlowReaderKept: a client that takes the output slowly but
// steadily keeps its attachment for many heartbeats. Its connection's
// buffers hold more of the output than it reads in a heartbeat, so a ping
// waits behind them longer than one: a pong that late is no sign of a
// client gone while the client goes on taking output. The attachment was
// ended, with no gap told (1006 at the client).
func TestAttachSlowReaderKept(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	// A client takes output in window updates of a segment, 64 KiB on
	// loopback: at this rate several come in a heartbeat.
	server.SetHeartbeat(d.srv, 2*time.Second)
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws := attachWS(t, d, c)
	got, err := readFor(c, ws, 12*time.Second, 128<<10)
	require.NoError(t, err, "after %d bytes", got)
	// What the connection holds drains quickly, and the output goes on:
	// the attachment was not ended meanwhile.
	more, err := readFor(c, ws, 3*time.Second, 16<<20)
	require.NoError(t, err, "after %d bytes read slowly and %d more", got, more)
}

// TestAttachStoppedReaderEnded: a client that stops taking the output, its
// connection open, is taken for gone after a few heartbeats: it does not
// keep its attachment for ever because output waits for it.
func TestAttachStoppedReaderEnded(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetHeartbeat(d.srv, time.Second)
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws := attachWS(t, d, c)
	_, err := readFor(c, ws, time.Second, 1<<20)
	require.NoError(t, err)
	time.Sleep(8 * time.Second) // reads nothing for many heartbeats
	// What its connection held comes first, then the end.
	_, err = readFor(c, ws, time.Minute, 1<<30)
	require.Error(t, err)
	require.NoError(t, c.Err(), "the attachment was not ended")
}
