package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// hostile is a daemon stand-in on loopback that answers each request it
// reads by script, which writes what it likes to the connection (bytes no
// HTTP server would send, slowly or for ever), to see that a call still
// ends, with an error that says why, and reads no more than it bounds.
type hostile struct {
	ln      net.Listener
	direct  *Client // the Client's own transport (direct)
	viaHTTP *Client // through an http.Client of its own
}

func newHostile(t *testing.T, script func(c net.Conn, req *http.Request)) *hostile {
	ln := serveScript(t, nil, func(c net.Conn, req *http.Request) bool { script(c, req); return true })
	h := &hostile{ln: ln}
	var err error
	h.direct, err = New("http://"+ln.Addr().String(), "token")
	require.NoError(t, err)
	require.NotNil(t, h.direct.direct)
	h.viaHTTP, err = New("http://"+ln.Addr().String(), "token",
		WithHTTPClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}))
	require.NoError(t, err)
	t.Cleanup(h.direct.CloseIdleConnections)
	t.Cleanup(h.viaHTTP.CloseIdleConnections)
	return h
}

// clients are the two ways a Client sends its requests.
func (h *hostile) clients() map[string]*Client {
	return map[string]*Client{"direct": h.direct, "net/http": h.viaHTTP}
}

// calls are a Client's calls that read an answer whole, each ended by
// ctx.
var calls = map[string]func(ctx context.Context, c *Client) error{
	"get": func(ctx context.Context, c *Client) error { _, err := c.Get(ctx, "p"); return err },
	"list": func(ctx context.Context, c *Client) error {
		_, err := c.List(ctx, ListOptions{})
		return err
	},
	"run": func(ctx context.Context, c *Client) error {
		_, _, err := c.Run(ctx, RunOptions{StartOptions: StartOptions{Cmd: "true"}})
		return err
	},
	"wait": func(ctx context.Context, c *Client) error { _, _, err := c.Wait(ctx, "p", 0); return err },
}

// writeFor writes chunk to w again and again, n bytes at most, then holds
// the connection open without a word: a client that reads on waits for
// its context's end (the hang guard), one that bounds what it reads has
// ended before.
func writeFor(c net.Conn, chunk string, n int) {
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := io.WriteString(c, chunk); err != nil {
			return
		}
	}
	io.Copy(io.Discard, c) // until the client closes it
}

// trickle writes s to c a byte every 50 ms, again and again, until the
// client closes the connection.
func trickle(c net.Conn, s string) {
	for i := 0; ; i++ {
		if _, err := c.Write([]byte{s[i%len(s)]}); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// guard is the context of a call that must end by itself well before it.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestHostileBodyTooLarge: an answer whose body has no end (chunked for
// ever, or a Content-Length of 2^40) ends a call that reads it whole once
// it passes the Client's bound, with an error that says so: the call once
// read on, its memory growing, until its context ended (a run or a wait
// has none but the caller's).
func TestHostileBodyTooLarge(t *testing.T) {
	t.Parallel()
	const head = "Content-Type: application/json\r\n"
	fill := strings.Repeat("a", 4096)
	bodies := map[string]func(c net.Conn, status string){
		"chunked": func(c net.Conn, status string) {
			io.WriteString(c, "HTTP/1.1 "+status+"\r\n"+head+"Transfer-Encoding: chunked\r\n\r\n6\r\n{\"x\":\"\r\n")
			writeFor(c, "1000\r\n"+fill+"\r\n", 8<<20)
		},
		"content-length": func(c net.Conn, status string) {
			io.WriteString(c, "HTTP/1.1 "+status+"\r\n"+head+"Content-Length: 1099511627776\r\n\r\n{\"x\":\"")
			writeFor(c, fill, 8<<20)
		},
	}
	for body, write := range bodies {
		for _, status := range []string{"200 OK", "202 Accepted"} {
			h := newHostile(t, func(c net.Conn, req *http.Request) { write(c, status) })
			for way, c := range h.clients() {
				c.maxAnswer = 1 << 20
				for name, call := range calls {
					ctx := guard(t)
					err := call(ctx, c)
					require.Error(t, err, "%s, %s %s, %s", way, body, status, name)
					require.NoError(t, ctx.Err(), "%s, %s %s, %s: ended by its context, not its bound", way, body, status, name)
					if status == "200 OK" || name == "run" || name == "wait" {
						require.ErrorContains(t, err, "over 1048576 bytes", "%s, %s %s, %s", way, body, status, name)
					}
				}
			}
		}
	}
}

// TestHostileTrickle: an answer trickled a byte every 50 ms, its headers
// or its body, holds a call no longer than its context: the deadline
// bounds the whole answer, not each read.
func TestHostileTrickle(t *testing.T) {
	t.Parallel()
	for what, answer := range map[string]func(c net.Conn){
		"headers": func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\n"); trickle(c, "X-A: a\r\n") },
		"body": func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{\"id\":\"")
			trickle(c, "a")
		},
		"chunks": func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"id\":\"\r\n")
			trickle(c, "1\r\na\r\n")
		},
		"interim": func(c net.Conn) { trickle(c, "HTTP/1.1 100 Continue\r\n\r\n") },
	} {
		h := newHostile(t, func(c net.Conn, req *http.Request) { answer(c) })
		for way, c := range h.clients() {
			for name, call := range calls {
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				start := time.Now()
				err := call(ctx, c)
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded, "%s, %s, %s", what, way, name)
				require.Less(t, time.Since(start), 15*time.Second, "%s, %s, %s", what, way, name) // a hang guard
			}
		}
	}
}

// TestHostileInterim: interim answers (1xx) with no end end the call with
// an error, through either transport.
func TestHostileInterim(t *testing.T) {
	t.Parallel()
	h := newHostile(t, func(c net.Conn, req *http.Request) {
		writeFor(c, "HTTP/1.1 100 Continue\r\n\r\n", 64<<20)
	})
	for way, c := range h.clients() {
		ctx := guard(t)
		_, err := c.Get(ctx, "p")
		require.Error(t, err, way)
		require.NoError(t, ctx.Err(), "%s: ended by its context, not its bound", way)
	}
}

// TestHostileJSON: JSON nested 100k levels deep, of the wrong types, or
// with bytes that are not UTF-8 ends in a clear error, or an answer whose
// text has U+FFFD in their place.
func TestHostileJSON(t *testing.T) {
	t.Parallel()
	answer := func(status, body string) string {
		return "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	deep := strings.Repeat("[", 100000)
	for body, want := range map[string]string{
		deep:                                "exceeded max depth",
		`{"id":` + deep:                     "exceeded max depth",
		`{"id":["p"]}`:                      "cannot unmarshal array",
		`{"id":"p","startedAt":5}`:          "cannot unmarshal number",
		`{"id":"p","pid":"12"}`:             "cannot unmarshal string",
		`{"id":"p","terminal":{"cols":-1}}`: "cannot unmarshal number -1",
		`{"id":"p","executionTimeout":"x"}`: "want a number of milliseconds",
	} {
		h := newHostile(t, func(c net.Conn, req *http.Request) { io.WriteString(c, answer("200 OK", body)) })
		for way, c := range h.clients() {
			_, err := c.Get(guard(t), "p")
			require.ErrorContains(t, err, want, "%s: %.40s", way, body)
			require.ErrorContains(t, err, "decode answer", "%s: %.40s", way, body)
		}
	}
	// An error answer that is not the daemon's: said as such.
	h := newHostile(t, func(c net.Conn, req *http.Request) {
		io.WriteString(c, answer("404 Not Found", `{"error":`+deep))
	})
	for way, c := range h.clients() {
		_, err := c.Get(guard(t), "p")
		var ae *Error
		require.ErrorAs(t, err, &ae, way)
		require.Equal(t, 404, ae.Status, way)
		require.Contains(t, ae.Message, "not the daemon's", way)
	}
	h = newHostile(t, func(c net.Conn, req *http.Request) { io.WriteString(c, answer("200 OK", "{\"id\":\"p\xff\xfeq\"}")) })
	for way, c := range h.clients() {
		p, err := c.Get(guard(t), "p")
		require.NoError(t, err, way)
		require.Equal(t, "p\uFFFD\uFFFDq", p.ID, way)
	}
}

// TestHostileHeadersTooLarge: an answer's header with no end ends the call
// once the headers pass 1 MiB, as net/http bounds them: the Client's own
// transport once read them on until the call's context ended.
func TestHostileHeadersTooLarge(t *testing.T) {
	t.Parallel()
	h := newHostile(t, func(c net.Conn, req *http.Request) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Endless: ")
		writeFor(c, strings.Repeat("a", 4096), 16<<20)
	})
	for way, c := range h.clients() {
		ctx := guard(t)
		_, err := c.Get(ctx, "p")
		require.Error(t, err, way)
		require.NoError(t, ctx.Err(), "%s: ended by its context, not its bound", way)
		require.ErrorContains(t, err, "headers exceeded", way)
	}
}

// TestHostileStream: a log stream's line with no end, or an event of
// data lines with no end, ends the stream with an error once it passes
// 4 MiB: the event's lines together were once read on for ever.
func TestHostileStream(t *testing.T) {
	t.Parallel()
	const head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := func(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }
	for what, answer := range map[string]func(c net.Conn){
		"line": func(c net.Conn) {
			io.WriteString(c, head+chunk("event: log\ndata: "))
			writeFor(c, chunk(strings.Repeat("a", 4096)), 16<<20)
		},
		"data lines": func(c net.Conn) {
			io.WriteString(c, head+chunk("event: log\n"))
			writeFor(c, chunk(strings.Repeat("data: "+strings.Repeat("a", 1000)+"\n", 4)), 64<<20)
		},
	} {
		h := newHostile(t, func(c net.Conn, req *http.Request) { answer(c) })
		for way, c := range h.clients() {
			ctx := guard(t)
			var end error
			for _, err := range c.Stream(ctx, "p", StreamOptions{}) {
				if err != nil {
					end = err
					break
				}
			}
			require.NoError(t, ctx.Err(), "%s, %s: ended by its context, not its bound", what, way)
			require.ErrorContains(t, end, "over 4194304 bytes", "%s, %s", what, way)
		}
	}
}

// TestHostilePaging: pages that name a cursor already asked for end the
// listing, or the join of a run's output, with an error: they were once
// paged for ever.
func TestHostilePaging(t *testing.T) {
	t.Parallel()
	answer := func(body string) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	for _, next := range []string{"2", ""} {
		h := newHostile(t, func(c net.Conn, req *http.Request) {
			switch {
			case strings.HasSuffix(req.URL.Path, "/logs"):
				io.WriteString(c, answer(`{"items":[{"cursor":"2","channel":"stdout","data":"x"}],"next":"`+next+`"}`))
			default:
				io.WriteString(c, answer(`{"items":[{"id":"p"}],"next":"2"}`))
			}
		})
		for way, c := range h.clients() {
			ctx := guard(t)
			n := 0
			var end error
			for _, err := range c.Processes(ctx, ListOptions{}) {
				if err != nil {
					end = err
					break
				}
				if n++; n > 10000 {
					break
				}
			}
			require.ErrorContains(t, end, "again", way)
			require.NoError(t, ctx.Err(), way)

			n = 0
			r := &RunResult{ProcessID: "p", OmittedBytes: 10, OmittedAfter: "1", Next: "9",
				Logs: []LogFrame{{Cursor: "1", Channel: "stdout", Data: "x"}, {Cursor: "9", Channel: "stdout", Data: "y"}}}
			_, err := c.WholeOutput(ctx, "", r, func(LogFrame) error {
				if n++; n > 10000 {
					return errors.New("paged for ever")
				}
				return nil
			})
			require.ErrorContains(t, err, "not the daemon's answer", "%s, next %q", way, next)
			require.NoError(t, ctx.Err(), way)
		}
	}
}

// TestHostileAttachMessage: an attachment's message over 1 MiB, far past
// any the daemon sends (32 KiB of output), text or binary, or one whose
// fragments never end, ends the attachment's Read with an error: a text
// message was once read whole into memory for as long as it came.
func TestHostileAttachMessage(t *testing.T) {
	t.Parallel()
	for _, typ := range []websocket.MessageType{websocket.MessageText, websocket.MessageBinary} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer ws.CloseNow()
			mw, err := ws.Writer(r.Context(), typ)
			if err != nil {
				return
			}
			chunk := []byte(strings.Repeat("a", 32<<10))
			for sent := 0; sent < 64<<20; sent += len(chunk) {
				if _, err := mw.Write(chunk); err != nil {
					return
				}
			}
			ws.Read(r.Context()) // until the client goes
		}))
		t.Cleanup(srv.Close)
		c, err := New(srv.URL, "token")
		require.NoError(t, err)
		ctx := guard(t)
		a, err := c.Attach(ctx, "p")
		require.NoError(t, err)
		buf := make([]byte, 64<<10)
		for err == nil {
			_, err = a.Read(buf)
		}
		require.NoError(t, ctx.Err(), "type %v: ended by its context, not its bound", typ)
		require.ErrorContains(t, err, "1048576", "type %v", typ)
		a.Close()
		c.CloseIdleConnections()
	}
}

// TestHostileNewCursors: a daemon whose logs pages each name a new cursor,
// without end, is not paged for ever: pages past the bytes the answer said
// lie up to its next are an error, frames with no bytes counted one.
func TestHostileNewCursors(t *testing.T) {
	t.Parallel()
	answer := func(body string) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	for _, data := range []string{"x", ""} {
		var mu sync.Mutex
		n := 100
		h := newHostile(t, func(c net.Conn, req *http.Request) {
			mu.Lock()
			n++
			at := strconv.Itoa(n)
			mu.Unlock()
			io.WriteString(c, answer(`{"items":[{"cursor":"`+at+`","channel":"stdout","data":"`+data+`"}],"next":"`+at+`"}`))
		})
		for way, c := range h.clients() {
			ctx := guard(t)
			frames := 0
			r := &RunResult{ProcessID: "p", OmittedBytes: 10, OmittedAfter: "1", Next: "9",
				Logs: []LogFrame{{Cursor: "1", Channel: "stdout", Data: "x"}, {Cursor: "9", Channel: "stdout", Data: "y"}}}
			_, err := c.WholeOutput(ctx, "", r, func(LogFrame) error {
				if frames++; frames > 10000 {
					return errors.New("paged for ever")
				}
				return nil
			})
			require.ErrorContains(t, err, "not the daemon's answer", "%s, data %q", way, data)
			require.LessOrEqual(t, frames, 1+11, way) // the head's frame, then 11 bytes
			require.NoError(t, ctx.Err(), way)
		}
	}
}

// TestHostileWaitAnsweredAtOnce: a daemon that answers a wait with no
// timeout 202 at once, again and again, is not asked as fast as it answers
// (a stream whose process ended asks it for the process's state).
func TestHostileWaitAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	var waits atomic.Int64
	h := newHostile(t, func(c net.Conn, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/wait") {
			waits.Add(1)
			body := `{"id":"p","state":"running"}`
			io.WriteString(c, "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: "+
				strconv.Itoa(len(body))+"\r\n\r\n"+body)
			return
		}
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n") // the stream: the process ended
	})
	ctx, cancel := context.WithTimeout(guard(t), time.Second)
	defer cancel()
	var end error
	for _, err := range h.direct.Stream(ctx, "p", StreamOptions{}) {
		if err != nil {
			end = err
			break
		}
	}
	require.ErrorIs(t, end, context.DeadlineExceeded)
	// 50, 100, 200, 400 ms pauses fit in the second: a handful of waits,
	// not the thousands asked without a pause.
	require.Less(t, waits.Load(), int64(50))
}

// TestHostileListingOfNewCursors: a daemon whose process pages each name a
// new next, without end, but hold no record, or records listed already, is
// not paged for ever: the daemon's pages hold a record at least, each
// process listed once.
func TestHostileListingOfNewCursors(t *testing.T) {
	t.Parallel()
	for name, items := range map[string]string{"no record": ``, "the same record": `{"id":"p","kind":"exec","state":"running"}`} {
		var n atomic.Int64
		stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"items":[`+items+`],"next":"`+strconv.FormatInt(n.Add(1), 36)+`"}`)
		}))
		c, err := New(stub.URL, "token")
		require.NoError(t, err)
		ctx := guard(t)
		listed := 0
		var end error
		for _, err := range c.Processes(ctx, ListOptions{}) {
			if err != nil {
				end = err
				break
			}
			listed++
		}
		c.CloseIdleConnections()
		stub.Close()
		require.NoError(t, ctx.Err(), "%s: listed for ever (%d pages, %d records)", name, n.Load(), listed)
		require.ErrorContains(t, end, "not the daemon's answer", name)
		require.LessOrEqual(t, n.Load(), int64(2), name)
		require.LessOrEqual(t, listed, 1, name)
	}
}
