package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/rawnet"
)

// daemonStub is an HTTP server on loopback that answers every request with
// handle, and counts the connections made to it.
type daemonStub struct {
	srv    *httptest.Server
	conns  atomic.Int32
	closed atomic.Int32
	c      *Client
}

func newDaemonStub(t *testing.T, handle http.HandlerFunc) *daemonStub {
	d := &daemonStub{srv: httptest.NewUnstartedServer(handle)}
	d.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			d.conns.Add(1)
		case http.StateClosed:
			d.closed.Add(1)
		}
	}
	d.srv.Start()
	t.Cleanup(d.srv.Close)
	var err error
	d.c, err = New(d.srv.URL, "token")
	require.NoError(t, err)
	require.NotNil(t, d.c.direct, "a plain http:// daemon is called directly")
	t.Cleanup(d.c.CloseIdleConnections)
	return d
}

func answerOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"status":"ok"}`+"\n")
}

// healthzHeld answers as answerOK does, a /healthz only once release is
// closed, saying on entered that it holds one.
func healthzHeld(entered chan<- struct{}, release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			entered <- struct{}{}
			<-release
		}
		answerOK(w, r)
	}
}

// post sends a POST with a JSON body, as most of a Client's calls are.
func (d *daemonStub) post(ctx context.Context) error {
	_, err := d.c.call(ctx, request{method: http.MethodPost, path: "/v1/x", body: map[string]string{"cmd": "true"}}, nil, http.StatusOK)
	return err
}

// TestDirectOnCallersGoroutine: a request is written and its answer read on
// the goroutine that sends it, where net/http's Transport hands each to
// goroutines of its own (whose wake-ups cost more than the rest of a
// request's way when the process was idle), and the connection serves the
// requests that follow.
func TestDirectOnCallersGoroutine(t *testing.T) {
	// Not parallel: the stacks looked at are the whole process's, and
	// other tests' clients go through net/http's Transport.
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	d := newDaemonStub(t, healthzHeld(entered, release))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := d.c.Health(ctx)
		done <- err
	}()
	<-entered
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	close(release)
	require.NoError(t, <-done)
	require.NotContains(t, stacks, "net/http.(*persistConn)", "no goroutine of net/http's Transport")
	for range 5 {
		require.NoError(t, d.post(ctx))
	}
	require.EqualValues(t, 1, d.conns.Load(), "one connection kept for every request")
}

// TestDirectAfterDaemonClosedIt: a kept connection the daemon has closed
// (idle too long, or a restart) is not used for the next request, which a
// POST could not be sent again for.
func TestDirectAfterDaemonClosedIt(t *testing.T) {
	t.Parallel()
	d := newDaemonStub(t, answerOK)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.post(ctx))
	d.srv.CloseClientConnections()
	// On loopback the close reaches this side as the daemon makes it.
	require.Eventually(t, func() bool { return d.closed.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, d.post(ctx))
	require.EqualValues(t, 2, d.conns.Load())
}

// TestDirectCancel: a request whose context ends while the daemon has not
// answered returns at once with the context's error, and its connection,
// which may yet get that answer, serves no other request.
func TestDirectCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	d := newDaemonStub(t, healthzHeld(entered, release))
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.post(ctx))
	hctx, hcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := d.c.Health(hctx)
		done <- err
	}()
	<-entered
	hcancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled request did not return")
	}
	require.NoError(t, d.post(ctx))
	require.EqualValues(t, 2, d.conns.Load(), "the cancelled request's connection was not kept")
}

// TestDirectBodyLeftUnread: an answer closed before its end closes its
// connection (what is left of it would be read as the next answer); one
// read to its end gives it back.
func TestDirectBodyLeftUnread(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		answerOK(w, r)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := d.c.send(ctx, request{method: http.MethodGet, path: "/big"}, http.StatusOK)
	require.NoError(t, err)
	b := make([]byte, 10)
	_, err = io.ReadFull(resp.Body, b)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	_, err = resp.Body.Read(b)
	require.Error(t, err, "a read after Close")
	require.NoError(t, d.post(ctx))
	require.EqualValues(t, 2, d.conns.Load())

	resp, err = d.c.send(ctx, request{method: http.MethodGet, path: "/big"}, http.StatusOK)
	require.NoError(t, err)
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, big, string(all))
	n, err := resp.Body.Read(b)
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF, "a read after the end reads the end again")
	require.NoError(t, resp.Body.Close())
	require.NoError(t, d.post(ctx))
	require.EqualValues(t, 2, d.conns.Load(), "the connection of the answer read to its end was kept")
}

// TestDirectErrors: a daemon that is not there gives the error an
// http.Client gives, with the request named.
func TestDirectErrors(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c, err := New("http://"+addr, "token")
	require.NoError(t, err)
	require.NotNil(t, c.direct)
	_, err = c.Health(t.Context())
	var ue *url.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "Get", ue.Op)
	require.Equal(t, "http://"+addr+"/healthz", ue.URL)
	var oe *net.OpError
	require.True(t, errors.As(err, &oe), "%v", err)
	require.Equal(t, "dial", oe.Op)

	c, err = New("https://"+addr, "token")
	require.NoError(t, err)
	require.Nil(t, c.direct, "https goes through the http.Client")
	c, err = New("http://"+addr, "token", WithHTTPClient(&http.Client{}))
	require.NoError(t, err)
	require.Nil(t, c.direct, "a caller's http.Client carries every request")
}

// TestDirectAnswerBeforeBody: the daemon answers a body over its limit
// before reading it all, and closes the connection; the write of the rest
// then fails, and the answer, sent already, is what the caller gets.
func TestDirectAnswerBeforeBody(t *testing.T) {
	t.Parallel()
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			io.WriteString(w, `{"error":{"code":"payload_too_large","message":"request body over the limit"}}`+"\n")
			return
		}
		answerOK(w, r)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	body := bytes.Repeat([]byte("x"), 64<<20)
	_, err := d.c.call(ctx, request{method: http.MethodPost, path: "/big", raw: bytes.NewReader(body)}, nil, http.StatusOK)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusRequestEntityTooLarge, e.Status)
	require.Equal(t, CodePayloadTooLarge, e.Code)
	require.NoError(t, d.post(ctx), "a new connection for the next request")
}

// TestDirectRawConnection: a connection's reads and writes are made raw
// (see package rawnet), as the daemon's are: through net.Conn, the first
// request after the process was idle, as a client is while a command runs,
// woke the Go runtime's monitor thread as it was written (P2 0.336–0.343×
// against 0.364–0.374×, P3 1.244–1.257× against 1.264–1.270×, in turns).
// The stale-connection look (peek) reaches its socket through it.
func TestDirectRawConnection(t *testing.T) {
	t.Parallel()
	d := newDaemonStub(t, answerOK)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.post(ctx))
	d.c.direct.mu.Lock()
	idle := append([]*directConn(nil), d.c.direct.idle...)
	d.c.direct.mu.Unlock()
	require.Len(t, idle, 1)
	require.IsType(t, &rawnet.Conn{}, idle[0].c)
	require.True(t, alive(idle[0].c), "a kept connection the daemon has not closed is alive")
	d.srv.CloseClientConnections()
	require.Eventually(t, func() bool { return !alive(idle[0].c) }, 10*time.Second, time.Millisecond,
		"a kept connection the daemon closed is seen closed")
}

// TestDirectNoAnswer: a daemon that closes the connection of a request
// before it answers (killed under a run) gives an error that says so, and,
// for a POST, that the request may have been carried out; the POST is not
// sent again.
func TestDirectNoAnswer(t *testing.T) {
	t.Parallel()
	var posts atomic.Int32
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, _, err := d.c.Run(ctx, RunOptions{StartOptions: StartOptions{Cmd: "sleep 100"}})
	require.ErrorIs(t, err, io.EOF)
	require.ErrorContains(t, err, "closed before the daemon answered")
	require.ErrorContains(t, err, "may have carried the request out")
	require.EqualValues(t, 1, posts.Load(), "a POST is never sent again")
	_, err = d.c.Get(ctx, "p")
	require.ErrorContains(t, err, "closed before the daemon answered")
	require.NotContains(t, err.Error(), "carried")
}

// TestStreamEndsWithItsContext: a stream whose ctx ends yields ctx's error
// next, not the events that came in the same read as the one it stopped
// at: a caller that cancelled at the frame it looked for got every frame
// that came with it.
func TestStreamEndsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: log\nid: 1\ndata: {\"cursor\":\"1\",\"channel\":\"stdout\",\"data\":\"one\\n\"}\n\n"+
			"event: log\nid: 2\ndata: {\"cursor\":\"2\",\"channel\":\"stdout\",\"data\":\"two\\n\"}\n\n"+
			"event: log\nid: 3\ndata: {\"cursor\":\"3\",\"channel\":\"stdout\",\"data\":\"three\\n\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	var end error
	for ev, err := range d.c.Stream(ctx, "p", StreamOptions{}) {
		if err != nil {
			end = err
			break
		}
		got = append(got, ev.Frame.Data)
		cancel()
	}
	require.Equal(t, []string{"one\n"}, got)
	require.ErrorIs(t, end, context.Canceled)
}

// TestStreamResumedAfterACut: a stream cut before its eof is asked again
// after the last frame it gave; one that finds the process ended, every
// frame read (204), gives the state a wait answers, then eof. A stream cut
// again and again with nothing new yields the cut, without asking for ever.
func TestStreamResumedAfterACut(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path+" "+r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/wait"):
			io.WriteString(w, `{"reason":"exited","exitCode":4}`)
		case strings.HasPrefix(r.URL.Path, "/v1/processes/cut/") && r.Header.Get("Last-Event-ID") == "":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: log\nid: 1\ndata: {\"cursor\":\"1\",\"channel\":\"stdout\",\"data\":\"one\\n\"}\n\n")
		case strings.HasPrefix(r.URL.Path, "/v1/processes/cut/"):
			w.WriteHeader(http.StatusNoContent)
		default: // cut every time, before any event
			w.Header().Set("Content-Type", "text/event-stream")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for ev, err := range d.c.Stream(ctx, "cut", StreamOptions{}) {
		require.NoError(t, err)
		got = append(got, ev.Type)
		if ev.Type == EventState {
			require.Equal(t, 4, *ev.State.ExitCode)
		}
	}
	require.Equal(t, []string{EventLog, EventState, EventEOF}, got)
	mu.Lock()
	require.Equal(t, []string{"/v1/processes/cut/logs/stream ", "/v1/processes/cut/logs/stream 1", "/v1/processes/cut/wait "}, asked)
	asked = nil
	mu.Unlock()

	var end error
	for _, err := range d.c.Stream(ctx, "closes", StreamOptions{}) {
		end = err
	}
	require.ErrorIs(t, end, io.ErrUnexpectedEOF)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, asked, 1+maxResumes, "asked again %d times", len(asked)-1)
}

// TestStreamCutAfterItsState: a stream cut after its state, before its
// eof, ends with eof rather than being asked again: the daemon sends the
// state once every frame was sent, so nothing but eof was left, and a
// process that wrote nothing leaves no frame to resume after: asked again
// without one, the daemon sent the state a second time.
func TestStreamCutAfterItsState(t *testing.T) {
	var asked atomic.Int32
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: state\ndata: {\"reason\":\"exited\",\"exitCode\":4}\n\n")
		if asked.Load() > 1 {
			io.WriteString(w, "event: eof\ndata: {}\n\n")
		}
	})
	got, end := streamTypes(d.c, "quiet")
	require.NoError(t, end)
	require.Equal(t, []string{EventState, EventEOF}, got)
	require.EqualValues(t, 1, asked.Load(), "not asked again")
}

// rawDaemon is a daemon stand-in on loopback that writes the bytes answer
// returns for the n-th request it reads (from 0, over every connection),
// as they are: answers an HTTP server would not send, to see what the
// client makes of them. It counts the connections made to it.
type rawDaemon struct {
	ln    net.Listener
	conns atomic.Int32
	c     *Client
}

func newRawDaemon(t *testing.T, answer func(n int, req *http.Request) string) *rawDaemon {
	d := &rawDaemon{}
	var asked atomic.Int32
	ln := serveScript(t, func() { d.conns.Add(1) }, func(c net.Conn, req *http.Request) bool {
		_, err := io.WriteString(c, answer(int(asked.Add(1))-1, req))
		return err == nil
	})
	d.ln = ln
	var err error
	d.c, err = New("http://"+ln.Addr().String(), "token")
	require.NoError(t, err)
	require.NotNil(t, d.c.direct, "a plain http:// daemon is called directly")
	t.Cleanup(d.c.CloseIdleConnections)
	return d
}

// serveScript serves a listener on loopback, closed at the test's end,
// that reads the requests of each connection it accepts (calling accepted,
// when not nil) and has script answer each: it writes what it likes to the
// connection, and says whether the connection goes on.
func serveScript(t *testing.T, accepted func(), script func(c net.Conn, req *http.Request) bool) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted != nil {
				accepted()
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			c.SetDeadline(time.Now().Add(60 * time.Second)) // a hang guard
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.Copy(io.Discard, req.Body); err != nil {
						return
					}
					if !script(c, req) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln
}

// processAnswer is the daemon's answer to a GET of process id.
func processAnswer(id string) string {
	body := `{"id":"` + id + `","kind":"exec","state":"running"}` + "\n"
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// getEach gets each process of ids in turn and requires each answer to be
// the one asked for: an answer taken for another request's puts every
// later one off by one.
func (d *rawDaemon) getEach(t *testing.T, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		p, err := d.c.Get(ctx, id)
		require.NoError(t, err, "Get(%s)", id)
		require.Equal(t, id, p.ID, "the answer to Get(%s)", id)
	}
}

// TestDirectInterimAnswers: interim answers (1xx) before the final one,
// as a proxy or server may send (103 Early Hints), are passed over, as
// net/http's Transport does: the final answer is the request's, not the
// next one's.
func TestDirectInterimAnswers(t *testing.T) {
	t.Parallel()
	d := newRawDaemon(t, func(n int, req *http.Request) string {
		a := processAnswer(strings.TrimPrefix(req.URL.Path, "/v1/processes/"))
		switch n {
		case 0:
			return "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" + a
		case 1:
			return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n" + a
		}
		return a
	})
	d.getEach(t, "first", "second", "third")
	require.EqualValues(t, 1, d.conns.Load(), "one connection kept for every request")
}

// TestDirectInterimAnswersBounded: a stream of interim answers with no
// final one ends the request with an error, not a read for ever.
func TestDirectInterimAnswersBounded(t *testing.T) {
	t.Parallel()
	d := newRawDaemon(t, func(n int, req *http.Request) string {
		return strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 1000)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := d.c.Get(ctx, "p")
	require.ErrorContains(t, err, "interim answers")
	require.NoError(t, ctx.Err())
}

// TestDirectBytesAfterTheAnswer: bytes that come after an answer, in the
// same read (a body longer than its Content-Length, an answer no request
// asked for), leave its connection unfit for another request: kept, they
// would be read as the next request's answer.
func TestDirectBytesAfterTheAnswer(t *testing.T) {
	t.Parallel()
	for name, extra := range map[string]string{
		"unasked answer": processAnswer("unasked"),
		"long body":      "trailing bytes",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newRawDaemon(t, func(n int, req *http.Request) string {
				a := processAnswer(strings.TrimPrefix(req.URL.Path, "/v1/processes/"))
				if n == 0 {
					a += extra
				}
				return a
			})
			d.getEach(t, "first", "second", "third")
			require.EqualValues(t, 2, d.conns.Load(), "a new connection after the one with bytes left")
		})
	}
}

// TestStreamResumeRefused: a resumption refused 429 (the daemon at its
// --max-streams, no Retry-After) or 503 is asked again, within the budget
// of a stream cut with no event, then yields the cut with the refusal; one
// refused otherwise (404) yields it at once, and so does a first request
// refused 429.
func TestStreamResumeRefused(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   Code
		asked  int // stream requests: the first, then its resumptions
	}{
		{http.StatusTooManyRequests, CodeResourceExhausted, 1 + maxResumes},
		{http.StatusServiceUnavailable, CodeDraining, 1 + maxResumes},
		{http.StatusNotFound, CodeNotFound, 2},
	} {
		var asked atomic.Int32
		d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
			if asked.Add(1) == 1 {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: log\nid: 1\ndata: {\"cursor\":\"1\",\"channel\":\"stdout\",\"data\":\"one\\n\"}\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"error":{"code":"`+string(tc.code)+`","message":"refused"}}`+"\n")
		})
		types, end := streamTypes(d.c, "p")
		require.Equal(t, []string{EventLog}, types, "%d", tc.status)
		require.ErrorIs(t, end, io.ErrUnexpectedEOF, "%d", tc.status)
		var apiErr *Error
		require.ErrorAs(t, end, &apiErr, "%d", tc.status)
		require.Equal(t, tc.status, apiErr.Status)
		require.EqualValues(t, tc.asked, asked.Load(), "%d: stream requests", tc.status)
	}

	var asked atomic.Int32
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":"resource_exhausted","message":"refused"}}`+"\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var end error
	for _, err := range d.c.Stream(ctx, "p", StreamOptions{}) {
		end = err
	}
	require.ErrorIs(t, end, &Error{Code: CodeResourceExhausted})
	require.EqualValues(t, 1, asked.Load(), "a first request refused 429 is not asked again")
}

// TestStreamResumeNotSent: a resumption that cannot be sent (the daemon
// restarting: its connection closed before any answer, or refused) is
// tried again as a refusal that may pass is, within the same budget, so
// that a stream outlives a restart; a first request that cannot be sent
// yields its error at once.
func TestStreamResumeNotSent(t *testing.T) {
	for _, hangUps := range []int{2, 100} {
		var streams atomic.Int32
		d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/wait") {
				io.WriteString(w, `{"reason":"exited","exitCode":4}`)
				return
			}
			switch n := int(streams.Add(1)); {
			case n == 1:
				w.Header().Set("Connection", "close") // the resumption comes on a new connection
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: log\nid: 1\ndata: {\"cursor\":\"1\",\"channel\":\"stdout\",\"data\":\"one\\n\"}\n\n")
			case n <= 1+hangUps:
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close() // no answer
				}
			default:
				w.WriteHeader(http.StatusNoContent)
			}
		})
		types, end := streamTypes(d.c, "p")
		if hangUps < maxResumes {
			require.NoError(t, end)
			require.Equal(t, []string{EventLog, EventState, EventEOF}, types)
			require.EqualValues(t, 2+hangUps, streams.Load(), "stream requests")
			continue
		}
		require.Equal(t, []string{EventLog}, types)
		require.ErrorIs(t, end, io.ErrUnexpectedEOF)
		require.EqualValues(t, 1+maxResumes, streams.Load(), "stream requests")
	}

	// The daemon gone for good after the first stream: its resumptions are
	// refused, tried again, then the cut is yielded with the refusal.
	listener := make(chan net.Listener, 1) // the stub's, once made: a channel, for -race
	gone := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		(<-listener).Close()
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: log\nid: 1\ndata: {\"cursor\":\"1\",\"channel\":\"stdout\",\"data\":\"one\\n\"}\n\n")
	})
	listener <- gone.srv.Listener
	types, end := streamTypes(gone.c, "p")
	require.Equal(t, []string{EventLog}, types)
	require.ErrorIs(t, end, io.ErrUnexpectedEOF)
	require.ErrorIs(t, end, syscall.ECONNREFUSED)
	require.ErrorContains(t, end, "resumed 5 times in a row")

	// No daemon at the address: the first request fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c, err := New("http://"+addr, "token")
	require.NoError(t, err)
	types, end = streamTypes(c, "p")
	require.Empty(t, types)
	require.ErrorIs(t, end, syscall.ECONNREFUSED)
	require.NotErrorIs(t, end, io.ErrUnexpectedEOF, "not a resumption")
}

// streamTypes follows the stream of process id through c, for 30 s at
// most (a hang guard), and returns its events' types and the error it
// ended with.
func streamTypes(c *Client, id string) (types []string, end error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ev, err := range c.Stream(ctx, id, StreamOptions{}) {
		if err != nil {
			return types, err
		}
		types = append(types, ev.Type)
	}
	return types, nil
}
