package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// collect reads a whole stream and returns its events.
func collect(t *testing.T, d *daemon, id string, opts client.StreamOptions) []client.Event {
	t.Helper()
	var evs []client.Event
	for ev, err := range d.c.Stream(ctx(t), id, opts) {
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}

// collectUntil reads a stream until it has n log events.
func collectUntil(t *testing.T, d *daemon, id string, n int) []client.Event {
	t.Helper()
	var evs []client.Event
	for ev, err := range d.c.Stream(ctx(t), id, client.StreamOptions{}) {
		require.NoError(t, err)
		if ev.Type == client.EventLog {
			evs = append(evs, ev)
			if len(evs) == n {
				break
			}
		}
	}
	require.Len(t, evs, n)
	return evs
}

// text joins the data of the log events.
func text(evs []client.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == client.EventLog {
			b.WriteString(ev.Frame.Data)
		}
	}
	return b.String()
}

func types(evs []client.Event) []string {
	var ts []string
	for _, ev := range evs {
		ts = append(ts, ev.Type)
	}
	return ts
}

// threeFrames runs a process that writes "1\n", "2\n" and "3\n" in
// three frames and exits 4: each line once the one before is in its log, so
// that no read takes two (written 20 ms apart, two came in one frame when
// the daemon was slow to read them).
func (d *daemon) threeFrames(t *testing.T) string {
	t.Helper()
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "for i in 1 2 3; do read x; echo $i; done; exit 4", Stdin: process.StdinOpen})
	require.NoError(t, err)
	for n := 1; n <= 3; n++ {
		require.NoError(t, d.c.WriteStdin(ctx(t), p.ID, []byte("\n"), n == 3))
		require.Eventually(t, func() bool {
			page, err := d.c.Logs(ctx(t), p.ID, client.LogsOptions{})
			return err == nil && len(page.Items) == n
		}, 30*time.Second, 5*time.Millisecond, "line %d is in the log", n)
	}
	r, _, err := d.c.Wait(ctx(t), p.ID, 30*time.Second)
	require.NoError(t, err)
	require.NotNil(t, r, "the process ended")
	return p.ID
}

func TestStream(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	id := d.threeFrames(t)

	all := collect(t, d, id, client.StreamOptions{})
	require.Equal(t, []string{"log", "log", "log", "state", "eof"}, types(all))
	require.Equal(t, "1\n2\n3\n", text(all))
	for _, ev := range all[:3] {
		require.Equal(t, ev.Frame.Cursor, ev.ID, "a log event's id is its cursor")
	}
	require.Equal(t, 4, exitCode(t, *all[3].State))

	tests := []struct {
		name string
		opts client.StreamOptions
		want string
	}{
		{"cursor", client.StreamOptions{Cursor: all[0].ID}, "2\n3\n"},
		{"last event id", client.StreamOptions{LastEventID: all[1].ID}, "3\n"},
		{"last event id wins", client.StreamOptions{Cursor: all[0].ID, LastEventID: all[1].ID}, "3\n"},
		{"base64", client.StreamOptions{Base64: true}, "MQo=Mgo=Mwo="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs := collect(t, d, id, tt.opts)
			require.Equal(t, tt.want, text(evs))
			require.Equal(t, []string{"state", "eof"}, types(evs)[len(evs)-2:])
		})
	}
	t.Run("at the end", func(t *testing.T) {
		t.Parallel()
		// The daemon answers 204 (nothing more will come): the stream
		// still ends as one asked before the end does, with how the
		// process ended, as the SDKs' streams do.
		for _, opts := range []client.StreamOptions{{Cursor: all[2].ID}, {LastEventID: all[2].ID}} {
			evs := collect(t, d, id, opts)
			require.Equal(t, []string{"state", "eof"}, types(evs), "%+v", opts)
			require.Equal(t, 4, exitCode(t, *evs[0].State))
			require.Equal(t, all[2].ID, evs[1].ID, "eof carries the cursor asked")
		}
	})
	t.Run("bad cursor", func(t *testing.T) {
		t.Parallel()
		for _, err := range d.c.Stream(ctx(t), id, client.StreamOptions{Cursor: "x"}) {
			requireCode(t, err, client.CodeInvalidArgument)
		}
	})
}

func TestStreamLive(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "while read line; do echo got $line; done", Stdin: process.StdinOpen})
	require.NoError(t, err)
	var got []string
	lines := []string{"a", "b", "c"}
	require.NoError(t, d.c.WriteStdin(c, p.ID, []byte(lines[0]+"\n"), false))
	var lastID string
	for ev, err := range d.c.Stream(c, p.ID, client.StreamOptions{}) {
		require.NoError(t, err)
		if ev.Type != client.EventLog {
			continue
		}
		got = append(got, ev.Frame.Data)
		lastID = ev.ID
		// Each answer arrives before the next line is sent: the stream is live.
		if len(got) < len(lines) {
			require.NoError(t, d.c.WriteStdin(c, p.ID, []byte(lines[len(got)]+"\n"), false))
		} else {
			break
		}
	}
	require.Equal(t, []string{"got a\n", "got b\n", "got c\n"}, got)

	// Resuming after the last event sees only what came next.
	require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("d\n"), true))
	evs := collect(t, d, p.ID, client.StreamOptions{LastEventID: lastID})
	require.Equal(t, "got d\n", text(evs))
	require.Equal(t, 0, exitCode(t, *evs[len(evs)-2].State))
}

func TestStreamTruncatedHead(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 256})
	// Separate writes make separate frames, so that several are retained.
	r := d.run(t, client.StartOptions{Cmd: "for i in $(seq 100); do echo line $i; sleep 0.001; done"})
	require.True(t, r.Truncated)
	require.NotEqual(t, "line 1\n", r.Stdout[:7])
	require.True(t, strings.HasSuffix(r.Stdout, "line 100\n"))

	p, err := d.c.Get(ctx(t), r.ProcessID)
	require.NoError(t, err)
	require.True(t, p.TruncatedHead)
	require.NotEqual(t, "1", p.FirstAvailableCursor)

	page, err := d.c.Logs(ctx(t), r.ProcessID, client.LogsOptions{Limit: 2})
	require.NoError(t, err)
	require.True(t, page.TruncatedHead)
	require.Equal(t, p.FirstAvailableCursor, page.FirstAvailableCursor)
	require.Equal(t, p.FirstAvailableCursor, page.Items[0].Cursor)
	require.Len(t, page.Items, 2)

	next, err := d.c.Logs(ctx(t), r.ProcessID, client.LogsOptions{Cursor: page.Next, Limit: 2})
	require.NoError(t, err)
	require.False(t, next.TruncatedHead, "a page after a retained cursor has no gap")
	var paged string
	for _, f := range append(page.Items, next.Items...) {
		paged += f.Data
	}
	require.True(t, strings.HasPrefix(r.Stdout, paged), "pages follow each other: %q", paged)

	evs := collect(t, d, r.ProcessID, client.StreamOptions{})
	require.Equal(t, client.EventWarning, evs[0].Type)
	require.Equal(t, p.FirstAvailableCursor, evs[0].Warning.FirstAvailableCursor)
	require.NotEmpty(t, evs[0].Warning.Message)
	require.Equal(t, r.Stdout, text(evs))
}

func TestStreamHeartbeat(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetHeartbeat(d.srv, 20*time.Millisecond)
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 30"})
	require.NoError(t, err)
	defer func() { _ = d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}) }()

	sctx, cancel := context.WithCancel(c)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, "GET", d.url+"/v1/processes/"+p.ID+"/logs/stream", nil)
	require.NoError(t, err)
	req.Header = authed()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ": ping\n", line)
	cancel()
	_, _ = io.Copy(io.Discard, resp.Body)
}

// TestStreamPastTheEnd pins that a stream resumed at or past the last frame
// of an ended process answers 204, which stops an EventSource from
// reconnecting after eof forever, and that eof's id lets it get there.
// TestFutureCursorRefused: a cursor past the newest frame of a process
// that runs on is no cursor an answer gave: pages, streams and interact
// refuse it, rather than answer nothing and then skip, without a word, the
// frames up to it once they come.
func TestFutureCursorRefused(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "echo a; while :; do sleep 0.1; echo x; done"})
	require.NoError(t, err)
	defer d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"})
	page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
	require.NoError(t, err)
	last, err := strconv.ParseUint(page.Next, 10, 64)
	require.NoError(t, err)
	future := strconv.FormatUint(last+1000, 10)
	base := "/v1/processes/" + p.ID
	for _, path := range []string{base + "/logs?cursor=" + future, base + "/logs/stream?cursor=" + future,
		base + "/logs?cursor=18446744073709551615"} {
		resp, body := d.do(t, "GET", path, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
		require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
		require.Contains(t, body, "past the newest frame")
	}
	_, _, err = d.c.Interact(c, p.ID, client.InteractOptions{Cursor: future, Timeout: client.Millis(time.Second)})
	var ce *client.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, client.CodeInvalidArgument, ce.Code)
	_, err = d.c.Logs(c, p.ID, client.LogsOptions{Cursor: page.Next})
	require.NoError(t, err, "the newest frame's cursor is one")
}

func TestStreamPastTheEnd(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	r := d.run(t, client.StartOptions{Cmd: "echo a; echo b"})
	all := collect(t, d, r.ProcessID, client.StreamOptions{})
	require.Equal(t, "eof", all[len(all)-1].Type)
	last := all[len(all)-3]
	require.Equal(t, "log", last.Type)
	require.Equal(t, last.ID, all[len(all)-1].ID, "eof's id is the last frame's cursor")

	path := "/v1/processes/" + r.ProcessID + "/logs/stream"
	for name, h := range map[string]http.Header{
		"Last-Event-ID at the end": {"Last-Event-ID": {last.ID}},
		"Last-Event-ID past it":    {"Last-Event-ID": {last.ID + "000"}},
	} {
		resp, body := d.do(t, "GET", path, h)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s: %s", name, body)
		require.Empty(t, body)
	}
	resp, body := d.do(t, "GET", path+"?cursor="+last.ID, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)

	resp, body = d.do(t, "GET", path+"?cursor=0", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "event: eof", "a cursor before the end still streams")
	resp, body = d.do(t, "GET", path, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "event: state", "no cursor: retained frames, state and eof")

	evs := collect(t, d, r.ProcessID, client.StreamOptions{LastEventID: last.ID})
	require.Equal(t, []string{"state", "eof"}, types(evs), "the client ends at once, saying how it ended")

	// Last-Event-ID wins over the query's cursor, but a cursor that is
	// none is refused all the same: it once streamed from Last-Event-ID.
	resp, body = d.do(t, "GET", path+"?cursor=zzz", http.Header{"Last-Event-ID": {"1"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "invalid_argument")
	resp, body = d.do(t, "GET", path+"?cursor="+last.ID, http.Header{"Last-Event-ID": {"0"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "Last-Event-ID wins: %s", body)
	require.Contains(t, body, "event: eof")

	t.Run("no output", func(t *testing.T) {
		r := d.run(t, client.StartOptions{Cmd: "true"})
		all := collect(t, d, r.ProcessID, client.StreamOptions{})
		require.Equal(t, []string{"state", "eof"}, types(all))
		resp, body := d.do(t, "GET", "/v1/processes/"+r.ProcessID+"/logs/stream",
			http.Header{"Last-Event-ID": {all[1].ID}})
		require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	})
	t.Run("running", func(t *testing.T) {
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 300"})
		require.NoError(t, err)
		defer func() { _ = d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}) }()
		sctx, cancel := context.WithCancel(c)
		defer cancel()
		req, err := http.NewRequestWithContext(sctx, "GET", d.url+"/v1/processes/"+p.ID+"/logs/stream", nil)
		require.NoError(t, err)
		req.Header = authed()
		req.Header.Set("Last-Event-ID", "0")
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "a live process may still write")
		// A cursor past what it wrote is none an answer gave (see
		// TestFutureCursorRefused).
		resp5, body := d.do(t, "GET", "/v1/processes/"+p.ID+"/logs/stream", http.Header{"Last-Event-ID": {"5"}})
		require.Equal(t, http.StatusBadRequest, resp5.StatusCode, body)
	})
}

// TestStreamFloodReusesLogMemory: a stream is done with each frame (here,
// copies it) before its follower takes the next, so that output flooding
// through a full log it keeps up with reuses the log's blocks
// (logstore.FollowLent) rather than leaving one to the garbage collector for
// every 64 KiB: the stream then allocates about one copy of the output (the
// copy here), not two.
func TestStreamFloodReusesLogMemory(t *testing.T) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	l := logstore.New(logstore.Options{})
	frames := server.StreamFrames(c, l)
	data := make([]byte, 64<<10)
	write := func(total int) {
		for n := 0; n < total; n += len(data) {
			data[0] = byte('a' + n%26)
			l.Write(logstore.Stdout, data)
			if got := <-frames; got != string(data) { // compared without a copy
				t.Fatalf("the stream's frame of %d bytes starting %q is not the %d written starting %q", len(got), got[:min(8, len(got))], len(data), data[:8])
			}
		}
	}
	write(2 * logstore.DefaultRetention)
	const flood = 32 << 20
	allocated := heaptest.Allocated(func() { write(flood) })
	t.Logf("%d KiB allocated while %d MiB went through", allocated>>10, flood>>20)
	require.Less(t, allocated, uint64(flood*3/2), "bytes allocated while %d went through a full log followed by a stream", flood)
}

// TestMaxStreams: past MaxStreams open streams, one more is refused 429
// resource_exhausted naming the flag, after its wait for one to end; one
// opened as soon as another closed is served. A stream whose client reads
// nothing held up to about 1.3 MB until it was let go, and nothing bounded
// how many were open.
func TestMaxStreams(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxStreams: 2})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 60"})
	require.NoError(t, err)
	defer d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	open := func() (*http.Response, context.CancelFunc) {
		sctx, cancel := context.WithCancel(c)
		req, err := http.NewRequestWithContext(sctx, "GET", d.url+"/v1/processes/"+p.ID+"/logs/stream", nil)
		require.NoError(t, err)
		req.Header = authed()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		return resp, cancel
	}
	var cancels []context.CancelFunc
	for range 2 {
		resp, cancel := open()
		defer resp.Body.Close()
		cancels = append(cancels, cancel)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	resp, cancel := open()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	require.Equal(t, client.CodeResourceExhausted, errorCode(t, string(b)))
	require.Contains(t, string(b), "--max-streams")
	// A client that closes a stream and opens another at once, as one
	// that reconnects does, gets it: the daemon waits a moment for the
	// stream it closed to end rather than refuse the new one.
	cancels[0]()
	for i := range 20 {
		resp, cancel := open()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			require.Failf(t, "a reopened stream refused", "stream %d: %s %s", i, resp.Status, b)
		}
		cancel()
		resp.Body.Close()
	}
}

// TestStreamResumedPastMaxStreams: a stream cut while the daemon is at its
// MaxStreams, another client having taken the place the cut gave back, is
// refused 429 on its resumption, and asked again once a place is free
// rather than end there: its follower gets the rest of the output. The
// client gave up at the first refusal, which lost the rest of a long
// process's output to a moment at the limit.
func TestStreamResumedPastMaxStreams(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxStreams: 1})
	c := ctx(t)
	goOn := filepath.Join(t.TempDir(), "go-on")
	p, err := d.c.Start(c, client.StartOptions{
		Cmd: "echo one; while [ ! -e " + goOn + " ]; do sleep 0.05; done; echo two"})
	require.NoError(t, err)
	defer d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	forward := func(r *http.Request) (*http.Response, context.CancelFunc) {
		fctx, cancel := context.WithCancel(c)
		req, err := http.NewRequestWithContext(fctx, r.Method, d.url+r.URL.RequestURI(), nil)
		require.NoError(t, err)
		req.Header = r.Header.Clone()
		resp, err := hc.Do(req)
		require.NoError(t, err)
		return resp, cancel
	}
	var mu sync.Mutex
	var holder *http.Response // another client's stream, open while the daemon refuses the resumption
	var holderCancel context.CancelFunc
	var streams []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, cancel := forward(r)
		defer cancel()
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if !strings.HasSuffix(r.URL.Path, "/logs/stream") {
			io.Copy(w, resp.Body)
			return
		}
		mu.Lock()
		streams = append(streams, r.Header.Get("Last-Event-ID")+" "+strconv.Itoa(resp.StatusCode))
		first := len(streams) == 1
		if resp.StatusCode == http.StatusTooManyRequests && holder != nil {
			// Refused: the other client closes its stream, and the process
			// writes on.
			holder.Body.Close()
			holderCancel()
			holder = nil
			require.NoError(t, os.WriteFile(goOn, nil, 0o644))
		}
		mu.Unlock()
		if !first {
			io.Copy(w, resp.Body)
			return
		}
		// The first stream: cut after its first log event, and another
		// client opens a stream in the place it gave back.
		br := bufio.NewReader(resp.Body)
		logged := false
		for {
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			io.WriteString(w, line)
			http.NewResponseController(w).Flush()
			if strings.HasPrefix(line, "event: log") {
				logged = true
			} else if logged && line == "\n" {
				break
			}
		}
		cancel()
		resp.Body.Close()
		for {
			hresp, hcancel := forward(r)
			if hresp.StatusCode == http.StatusOK {
				mu.Lock()
				holder, holderCancel = hresp, hcancel
				mu.Unlock()
				return
			}
			hresp.Body.Close()
			hcancel()
		}
	}))
	defer proxy.Close()
	pc, err := client.New(proxy.URL, testToken)
	require.NoError(t, err)
	defer pc.CloseIdleConnections()

	var out strings.Builder
	var types []string
	for ev, err := range pc.Stream(c, p.ID, client.StreamOptions{}) {
		require.NoError(t, err)
		if ev.Type == client.EventLog {
			out.WriteString(ev.Frame.Data)
		} else {
			types = append(types, ev.Type)
		}
	}
	require.Equal(t, "one\ntwo\n", out.String())
	require.Equal(t, []string{client.EventState, client.EventEOF}, types)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, streams, 3, "%q", streams)
	require.Equal(t, "429", streams[1][strings.IndexByte(streams[1], ' ')+1:], "%q", streams)
	require.Equal(t, "200", streams[2][strings.IndexByte(streams[2], ' ')+1:], "%q", streams)
}
