package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// probe asks path without a token and returns the status and the probe's
// status field.
func (d *daemon) probe(t *testing.T, path string) (int, string) {
	t.Helper()
	code, body := d.raw(t, "GET", path, "", nil)
	var a struct{ Status string }
	require.NoError(t, json.Unmarshal([]byte(body), &a), body)
	return code, a.Status
}

// untilReady polls /readyz until it answers 200: the daemon's first check
// that a shell starts has passed.
func (d *daemon) untilReady(t *testing.T) {
	t.Helper()
	for c := ctx(t); ; {
		code, status := d.probe(t, "/readyz")
		if code == http.StatusOK {
			require.Equal(t, "ready", status)
			return
		}
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, "starting", status)
		select {
		case <-c.Done():
			t.Fatal("the daemon did not become ready")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// gated is a command that runs until the file gate exists, then says done.
func gated(gate string) string {
	return "while [ ! -e " + gate + " ]; do sleep 0.02; done; echo done"
}

func TestProbes(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	code, status := d.probe(t, "/livez")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", status)
	d.untilReady(t)
	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := http.Get(d.url + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "%s may be answered from a cache", path)
	}

	// A daemon whose shell cannot start is alive but not ready: its
	// stream directory cannot be made, under a file.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	bad := start(t, server.Options{StreamDir: filepath.Join(file, "dir")})
	_, err := bad.c.CreateSession(ctx(t), client.SessionOptions{})
	require.Error(t, err, "a session cannot start without its stream directory")
	code, _ = bad.probe(t, "/livez")
	require.Equal(t, http.StatusOK, code)
	for c := ctx(t); ; {
		code, status = bad.probe(t, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code)
		if status == "unready" {
			break
		}
		require.Equal(t, "starting", status)
		select {
		case <-c.Done():
			t.Fatal("the check of the shell did not end")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDrain drains a daemon while a command runs: readiness turns 503, new
// work is refused with 503 draining and Retry-After, the command's run
// answer and the stream of its output are delivered whole, and the drain
// ends once they are, whatever a stream of a session's own log does.
func TestDrain(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	d.untilReady(t)
	gate := filepath.Join(t.TempDir(), "gate")

	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	type answer struct {
		r   *client.RunResult
		err error
	}
	ran := make(chan answer, 1)
	go func() {
		r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: gated(gate)}})
		ran <- answer{r, err}
	}()
	exec, err := d.c.Start(c, client.StartOptions{Cmd: gated(gate)})
	require.NoError(t, err)
	streamed := make(chan []client.Event, 1)
	go func() {
		var evs []client.Event
		for ev, err := range d.c.Stream(c, exec.ID, client.StreamOptions{}) {
			if err != nil {
				break
			}
			evs = append(evs, ev)
		}
		streamed <- evs
	}()
	// A stream of the session's own log lasts as long as the session: the
	// drain does not wait for it.
	sessionStream := make(chan struct{})
	go func() {
		defer close(sessionStream)
		for _, err := range d.c.Stream(c, s.ID, client.StreamOptions{}) {
			if err != nil {
				return
			}
		}
	}()
	for {
		list, err := d.c.List(c, client.ListOptions{SessionID: s.ID, State: "running"})
		require.NoError(t, err)
		if len(list.Items) == 2 { // the shell and the command
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	drained := make(chan error, 1)
	go func() { drained <- d.srv.Drain(c) }()
	for {
		code, status := d.probe(t, "/readyz")
		if code == http.StatusServiceUnavailable {
			require.Equal(t, "draining", status)
			break
		}
		require.Equal(t, http.StatusOK, code, "ready until the drain begins")
		time.Sleep(5 * time.Millisecond)
	}
	code, _ := d.probe(t, "/livez")
	require.Equal(t, http.StatusOK, code, "a draining daemon is alive")

	refused := []struct{ path, body string }{
		{"/v1/processes", `{"cmd":"true"}`},
		{"/v1/processes/run", `{"cmd":"true"}`},
		{"/v1/processes", `{"kind":"pty"}`},
		{"/v1/sessions", `{}`},
		{"/v1/sessions", `{"language":"python"}`},
		{"/v1/sessions/" + s.ID + "/commands", `{"cmd":"true"}`},
		{"/v1/sessions/" + s.ID + "/commands/run", `{"cmd":"true"}`},
	}
	for _, r := range refused {
		resp, body := d.post(t, r.path, r.body)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s: %s", r.path, r.body, body)
		require.Contains(t, body, `"code":"draining"`)
		require.Contains(t, body, `"message":"the daemon is stopping and takes no new work"`, "without its code again")
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	_, err = d.c.Start(c, client.StartOptions{Cmd: "true"})
	requireCode(t, err, client.CodeDraining)
	var drainErr *client.Error
	require.ErrorAs(t, err, &drainErr)
	require.Equal(t, time.Second, drainErr.RetryAfter, "the Go client gives the daemon's Retry-After")

	select {
	case err := <-drained:
		t.Fatalf("the drain ended (%v) with work in flight", err)
	case <-ran:
		t.Fatal("the command answered before it ended")
	default:
	}
	// Work in flight is still served: its processes can be read and listed.
	list, err := d.c.List(c, client.ListOptions{State: "running"})
	require.NoError(t, err)
	require.Len(t, list.Items, 3)

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	a := <-ran
	require.NoError(t, a.err)
	require.Equal(t, "done\n", a.r.Stdout)
	require.Equal(t, api.Exited, a.r.Reason)
	evs := <-streamed
	require.Equal(t, []string{"log", "state", "eof"}, types(evs))
	require.Equal(t, "done\n", text(evs))
	require.NoError(t, <-drained)

	select {
	case <-sessionStream:
		t.Fatal("the drain ended the session's stream; Shutdown does")
	default:
	}
	_, err = d.c.Session(c, s.ID)
	require.NoError(t, err, "a drained daemon keeps its sessions until Shutdown")
}

// When the last work a drain waited for ends, the drain goes on a moment
// for its client's next requests about it: an SDK whose command ended
// pages its log at once, and a drain that ended between its requests (the
// daemon then stops listening) lost the result of a command that ran to its
// end. A drain that began with nothing in flight ends at once.
func TestDrainLingersForTheLastWork(t *testing.T) {
	t.Parallel()
	c := ctx(t)
	idle := start(t, server.Options{})
	idle.untilReady(t)
	begun := time.Now()
	require.NoError(t, idle.srv.Drain(c))
	require.Less(t, time.Since(begun), 900*time.Millisecond, "a drain with nothing in flight lingers")

	d, id, end, drained := drainingWithWork(t, c)
	end()
	// The client's next requests about the ended process.
	for range 3 {
		_, err := d.c.Logs(c, id, client.LogsOptions{})
		require.NoError(t, err)
		select {
		case <-drained:
			t.Fatal("the drain ended between a client's requests about the work it waited for")
		default:
		}
	}
	require.NoError(t, <-drained, "the drain ends once the client is done")
}

// drainingWithWork starts a daemon with a process in flight and drains it
// under ctx, which Draining says once it returns; end lets the process end
// and waits for it, and drained gives Drain's result.
func drainingWithWork(t *testing.T, ctx context.Context) (d *daemon, id string, end func(), drained <-chan error) {
	t.Helper()
	d = start(t, server.Options{})
	d.untilReady(t)
	gate := filepath.Join(t.TempDir(), "gate")
	p, err := d.c.Start(ctx, client.StartOptions{Cmd: gated(gate)})
	require.NoError(t, err)
	result := make(chan error, 1)
	go func() { result <- d.srv.Drain(ctx) }()
	require.Eventually(t, d.srv.Draining, 10*time.Second, 5*time.Millisecond)
	end = func() {
		t.Helper()
		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		_, _, err := d.c.Wait(ctx, p.ID, 20*time.Second)
		require.NoError(t, err)
	}
	return d, p.ID, end, result
}

// post sends body to path with the token and returns the answer and its
// body.
func (d *daemon) post(t *testing.T, path, body string) (*http.Response, string) {
	t.Helper()
	return d.send(t, "POST", path, body, authed())
}

// TestBeginWork checks the drain's hook for work another surface of the
// daemon started: the drain waits for it, and refuses more.
func TestBeginWork(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	end, err := d.srv.BeginWork()
	require.NoError(t, err)
	require.False(t, d.srv.Draining())
	drained := make(chan error, 1)
	go func() { drained <- d.srv.Drain(ctx(t)) }()
	for !d.srv.Draining() {
		time.Sleep(5 * time.Millisecond)
	}
	_, err = d.srv.BeginWork()
	require.ErrorIs(t, err, server.ErrDraining)
	require.ErrorContains(t, d.srv.Ready(), "draining")
	select {
	case err := <-drained:
		t.Fatalf("the drain ended (%v) with work begun", err)
	case <-time.After(50 * time.Millisecond):
	}
	end()
	end() // a second call gives nothing back twice
	require.NoError(t, <-drained)
}

// TestDrainLingerStartsAgainWithEachRequest: the drain is over 1 s after the
// last request about its work was answered, not 1 s after the work ended. A
// client that reads an ended command's log page by page, a little slower
// each time, is answered throughout; before, the linger ran from the work's
// end and the drain ended under the client's fourth request.
func TestDrainLingerStartsAgainWithEachRequest(t *testing.T) {
	t.Parallel()
	c := ctx(t)
	d, id, end, drained := drainingWithWork(t, c)
	// Lengthened, so that a request may come late on a loaded machine
	// and still within the linger the one before it starts: at 1 s, a
	// loaded run's 100 ms sleep and request together took past it.
	const linger = 3 * time.Second
	server.SetDrainLinger(d.srv, linger)
	end()
	// Requests 100 ms apart, 3.5 s in all: past the linger since the
	// work's end, each well within the linger the one before it starts.
	for range 35 {
		time.Sleep(100 * time.Millisecond)
		select {
		case <-drained:
			t.Fatal("the drain ended while a client went on asking about the work it waited for")
		default:
		}
		_, err := d.c.Logs(c, id, client.LogsOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, <-drained, "the drain ends once the client is done")
}

// TestDrainNotHeldByAPoller: a client that lists the processes and
// sessions every 200 ms (a dashboard, watch conch ps) does not hold the
// drain once its work has ended: each list started the linger again, and
// the drain lasted its whole --drain-timeout.
func TestDrainNotHeldByAPoller(t *testing.T) {
	t.Parallel()
	c := ctx(t)
	d, _, end, drained := drainingWithWork(t, c)
	end()
	for range 20 {
		select {
		case err := <-drained:
			require.NoError(t, err)
			return
		case <-time.After(200 * time.Millisecond):
		}
		_, err := d.c.List(c, client.ListOptions{})
		require.NoError(t, err)
		_, err = d.c.Sessions(c)
		require.NoError(t, err)
	}
	t.Fatal("the drain did not end within 4 s of its work's end, though lists alone came")
}

// TestDrainRefusesNewWorkBeforeItsBody: new work that comes while the daemon
// drains is refused before its body is read, and does not hold the drain: a
// client that sent its body slowly was owed an answer, and held the drain,
// until the whole body had come (or 30 s without a byte), only to be
// refused then.
func TestDrainRefusesNewWorkBeforeItsBody(t *testing.T) {
	t.Parallel()
	dc, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	d, _, end, drained := drainingWithWork(t, dc)
	// New work whose body stops after three bytes, the rest never sent.
	conn := d.dial(t)
	defer conn.Close()
	body := `{"cmd":"true"}`
	_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		testToken, len(body), body[:3])
	require.NoError(t, err)
	// The work in flight ends: the drain is over a second later, the
	// refused request's body still pending.
	end()
	require.NoError(t, <-drained, "a refused request held the drain")
	// Its answer: 503 draining, once the daemon has waited its while for
	// the rest of the body (as for any answer given before a body).
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
}
