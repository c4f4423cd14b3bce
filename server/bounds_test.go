package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/server"
)

// nestedArrays is a run body whose env holds n arrays nested in each other.
func nestedArrays(n int) []byte {
	return []byte(`{"cmd":"true","env":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

// TestDeepBodyBounded checks that a body nested past the limit is refused
// with 400 naming the limit, and that reading it costs the daemon no more
// than twice the body, whatever its depth: the key check once kept a path
// per level, which made 40 KB of brackets cost 630 MB. It is not parallel,
// so that what the process allocates meanwhile is this request's.
func TestDeepBodyBounded(t *testing.T) {
	d := start(t, server.Options{})
	for _, tt := range []struct {
		name string
		n    int
	}{{"small", 5_000}, {"10MB", 5_000_000}} {
		t.Run(tt.name, func(t *testing.T) {
			body := nestedArrays(tt.n)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			// A first request opens the connection, so that its buffers are
			// not counted.
			resp, err := hc.Get(d.url + "/healthz")
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			req, err := http.NewRequestWithContext(ctx(t), "POST", d.url+"/v1/processes/run", bytes.NewReader(body))
			require.NoError(t, err)
			req.Header = authed()
			resp, err = hc.Do(req)
			require.NoError(t, err)
			answer, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			runtime.ReadMemStats(&after)

			allocated := after.TotalAlloc - before.TotalAlloc
			bound := 3*uint64(len(body)) + 4<<20 // its buffer grows twofold as it comes
			require.Less(t, allocated, bound, "a %d-byte body allocated %d bytes", len(body), allocated)
			t.Logf("a %d-byte body allocated %d bytes", len(body), allocated)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%.200s", answer)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, string(answer)))
			require.Contains(t, errorMessage(t, string(answer)), "64 levels")
		})
	}
	t.Run("64 levels are taken", func(t *testing.T) {
		// 63 arrays inside the body's object: the value's type is wrong,
		// which is said, not the depth.
		status, answer := d.raw(t, "POST", "/v1/processes/run", string(nestedArrays(63)), authed())
		require.Equal(t, http.StatusBadRequest, status, answer)
		require.NotContains(t, errorMessage(t, answer), "levels")
		status, answer = d.raw(t, "POST", "/v1/processes/run", string(nestedArrays(64)), authed())
		require.Equal(t, http.StatusBadRequest, status, answer)
		require.Contains(t, errorMessage(t, answer), "64 levels")
	})
}

// TestBodyStringsUTF8 checks that a string of a body that is not valid
// UTF-8, as raw bytes or as an escaped lone surrogate, is refused with 400
// naming its field, rather than run with U+FFFD in its place; and that
// valid text, escaped surrogate pairs included, runs as sent.
func TestBodyStringsUTF8(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "cat >/dev/null", Stdin: api.StdinOpen})
	require.NoError(t, err)
	tests := []struct {
		name, path, body string
		field            string // named in the message
	}{
		{"raw byte in cmd", "/v1/processes/run", "{\"cmd\":\"echo \xff\"}", `"cmd"`},
		{"truncated sequence in cmd", "/v1/processes/run", "{\"cmd\":\"echo \xc3\"}", `"cmd"`},
		{"encoded surrogate in cmd", "/v1/processes/run", "{\"cmd\":\"echo \xed\xa0\x80\"}", `"cmd"`},
		{"lone high surrogate in cmd", "/v1/processes/run", `{"cmd":"echo \ud800"}`, `"cmd"`},
		{"lone low surrogate in cmd", "/v1/processes/run", `{"cmd":"echo \udc00x"}`, `"cmd"`},
		{"high surrogate then a letter", "/v1/processes/run", `{"cmd":"echo \ud800\u0041"}`, `"cmd"`},
		{"env value", "/v1/processes/run", `{"cmd":"true","env":{"X":"\ud800"}}`, `"env.X"`},
		{"env key", "/v1/processes", "{\"cmd\":\"true\",\"env\":{\"X\xff\":\"1\"}}", `"env"`},
		{"argv element", "/v1/processes/run", "{\"argv\":[\"echo\",\"\xfe\"]}", `"argv[1]"`},
		{"session cwd", "/v1/sessions", `{"cwd":"/tmp/\udfff"}`, `"cwd"`},
		{"session command", "/v1/sessions/" + s.ID + "/commands/run", "{\"cmd\":\"echo \xff\"}", `"cmd"`},
		{"interact input", "/v1/processes/" + p.ID + "/interact", `{"input":"\ud800","timeout":1}`, "inputBase64"},
		{"unknown field's name", "/v1/processes/run", "{\"cmd\":\"true\",\"\xff\":1}", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := d.raw(t, "POST", tt.path, tt.body, authed())
			require.Equal(t, http.StatusBadRequest, status, body)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
			msg := errorMessage(t, body)
			require.Contains(t, msg, "UTF-8")
			require.Contains(t, msg, tt.field)
		})
	}
	t.Run("valid text runs as sent", func(t *testing.T) {
		t.Parallel()
		status, body := d.raw(t, "POST", "/v1/processes/run",
			`{"cmd":"printf '%s|%s' \"$V\" é","env":{"V":"\ud83d\ude00\u00e9"}}`, authed())
		require.Equal(t, http.StatusOK, status, body)
		var r client.RunResult
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		require.Equal(t, "😀é|é", r.Stdout)
	})
}

// TestOddQueries checks that a query string the URL parser would partly
// drop (a semicolon, a bad escape), a parameter given twice or one that is
// not UTF-8 is refused with 400, never read as if it were absent.
func TestOddQueries(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	r := d.run(t, client.StartOptions{Cmd: "echo one; echo two"})
	logs := "/v1/processes/" + r.ProcessID + "/logs"
	for _, q := range []string{"cursor=1;2", "limit=1;x", "cursor=%zz", "limit=1&limit=2", "name=%ff", ";"} {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			resp, body := d.do(t, "GET", logs+"?"+q, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
			require.Contains(t, errorMessage(t, body), "query")
		})
	}
	resp, body := d.do(t, "GET", logs+"?limit=1&encoding=text", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestUnknownQueryParameters: a query parameter the route does not read is
// refused, as an unknown field of a body is, naming those it reads: a
// misspelt ?EOF=true left stdin open and answered 204. An unknown path
// with a query is still 404.
func TestUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(t.Context(), client.StartOptions{Cmd: "cat", Stdin: "open"})
	require.NoError(t, err)
	for _, tc := range []struct{ method, path, says string }{
		{"POST", "/v1/processes/" + p.ID + "/stdin?EOF=true", "this route takes eof"},
		{"GET", "/v1/processes/" + p.ID + "/logs?limt=1", "this route takes cursor, limit, encoding"},
		{"GET", "/v1/processes/" + p.ID + "?cursor=0", "this route takes none"},
		{"GET", "/v1/processes?status=running", "this route takes state, kind"},
	} {
		resp, body := d.do(t, tc.method, tc.path, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", tc.method, tc.path, body)
		require.Contains(t, errorMessage(t, body), tc.says, "%s %s", tc.method, tc.path)
	}
	got, err := d.c.Get(t.Context(), p.ID)
	require.NoError(t, err)
	require.Equal(t, "open", string(got.Stdin), "the refused ?EOF=true closed stdin")
	resp, body := d.do(t, "GET", "/v1/no-such-route?x=1", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
}

// rawExchange writes req on a new connection to d and returns the answer,
// read while the request is still being written.
func rawExchange(t *testing.T, d *daemon, req string) (*http.Response, string) {
	t.Helper()
	conn := d.dial(t)
	go func() { _, _ = io.WriteString(conn, req) }() // ends with the connection
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestProtocolErrorsJSON checks that what the HTTP server refuses before any
// route sees it, headers over the limit first, is answered in the API's
// error shape.
func TestProtocolErrorsJSON(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	big := fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n\r\n", d.addr, strings.Repeat("a", 2<<20))
	resp, body := rawExchange(t, d, big)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, client.CodePayloadTooLarge, errorCode(t, body))
	require.Contains(t, errorMessage(t, body), "1048576 bytes")

	resp, body = rawExchange(t, d, "GET /healthz HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))

	// Each says what is wrong, not the status again, and carries a
	// request id, as every answer does.
	for req, want := range map[string]string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n": "malformed",
		"GET /healthz HTTP/1.1\r\n\r\n":                        "missing required Host header",
		"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n":             "unsupported protocol version",
	} {
		resp, body := rawExchange(t, d, req)
		require.Contains(t, errorMessage(t, body), want, "%q", req)
		require.NotContains(t, errorMessage(t, body), http.StatusText(resp.StatusCode), "%q", req)
		require.Equal(t, http.StatusText(resp.StatusCode), strings.TrimPrefix(resp.Status, fmt.Sprint(resp.StatusCode, " ")), "%q", req)
		require.NotEmpty(t, resp.Header.Get("X-Request-Id"), "%q", req)
	}
}

// TestRequestsWithoutAPath: the request forms whose target is no path
// (OPTIONS *, CONNECT's host:port, HTTP/2's preface) go through the Host
// check, the token and the API's error shape as every other does. net/http
// answered OPTIONS * itself, 200 and empty, whatever the Host; the mux
// answered CONNECT with a text/plain 404; the preface got an empty 400;
// none had a request id.
func TestRequestsWithoutAPath(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, tt := range []struct {
		req    string
		status int
		code   client.Code
	}{
		{"OPTIONS * HTTP/1.1\r\nHost: evil.com\r\n\r\n", http.StatusForbidden, client.CodePermissionDenied},
		{"OPTIONS * HTTP/1.1\r\nHost: " + d.addr + "\r\n\r\n", http.StatusUnauthorized, client.CodeUnauthenticated},
		{"CONNECT evil.com:443 HTTP/1.1\r\nHost: evil.com:443\r\n\r\n", http.StatusForbidden, client.CodePermissionDenied},
		{"CONNECT " + d.addr + " HTTP/1.1\r\nHost: " + d.addr + "\r\nAuthorization: Bearer " + testToken + "\r\n\r\n", http.StatusNotFound, client.CodeNotFound},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", http.StatusForbidden, client.CodePermissionDenied},
	} {
		resp, body := rawExchange(t, d, tt.req)
		require.Equal(t, tt.status, resp.StatusCode, "%q: %s", tt.req, body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%q", tt.req)
		require.Equal(t, tt.code, errorCode(t, body), "%q", tt.req)
		require.NotEmpty(t, resp.Header.Get("X-Request-Id"), "%q", tt.req)
	}
}

// TestRouteBodyLimits checks that a body over its route's limit is refused
// with 413 naming the limit, and the flag when it is --body-limit.
func TestRouteBodyLimits(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{BodyLimit: 1 << 20})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "sleep 300"})
	require.NoError(t, err)
	pad := strings.Repeat(" ", 100<<10)
	status, body := d.raw(t, "POST", "/v1/processes/"+p.ID+"/kill", `{"signal":"TERM"}`+pad, authed())
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.Equal(t, client.CodePayloadTooLarge, errorCode(t, body))
	require.Contains(t, errorMessage(t, body), "65536 bytes")

	status, body = d.raw(t, "POST", "/v1/processes/run", `{"cmd":"true"}`+strings.Repeat(" ", 2<<20), authed())
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.Contains(t, errorMessage(t, body), "1048576 bytes")
	require.Contains(t, errorMessage(t, body), "--body-limit")

	status, body = d.raw(t, "POST", "/v1/processes/"+p.ID+"/stdin", strings.Repeat("x", 2<<20), authed())
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.Contains(t, errorMessage(t, body), "--body-limit")

	// Under the limits, both are taken.
	status, body = d.raw(t, "POST", "/v1/processes/run", `{"cmd":"true"}`+pad, authed())
	require.Equal(t, http.StatusOK, status, body)
	status, body = d.raw(t, "POST", "/v1/processes/"+p.ID+"/kill", `{"signal":"KILL"}`, authed())
	require.Equal(t, http.StatusAccepted, status, body)
}

// TestBodySaidOverTheLimit: a body whose Content-Length is over the
// route's limit is refused at once, before a byte of it is read: a client
// that sent Expect: 100-continue gets the 413 rather than 100 Continue (it
// was told to go on, and the daemon read the limit's worth before it
// refused), and one that sends no body gets it rather than a 408 once the
// body's idle time ran out, meanwhile holding a limit's worth of the
// bodies' budget.
func TestBodySaidOverTheLimit(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{BodyLimit: 1 << 20})
	for _, expect := range []string{"Expect: 100-continue\r\n", ""} {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "POST /v1/processes/run HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n%s\r\n",
			d.addr, testToken, expect)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "no answer, %q", expect)
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%q: %s", expect, b)
		require.Contains(t, errorMessage(t, string(b)), "--body-limit")
	}
}

// TestTimeoutQueryOutOfRange: a wait or ready timeout past what a duration
// holds is refused, as one in a JSON body is: 18446744073710 ms wrapped to
// a wait of a few milliseconds, answered 202 at once.
func TestTimeoutQueryOutOfRange(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "sleep 60"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	for _, path := range []string{"/wait?timeout=18446744073710", "/ready?port=any&timeout=18446744073710",
		"/logs?limit=99999999999999999999", "/wait?timeout=99999999999999999999"} {
		resp, body := d.do(t, "GET", "/v1/processes/"+p.ID+path, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, body, "out of range")
	}
}

// TestStdinEOFExactly: stdin's eof is true or false, as the contract and
// the refusal's message say; 1 and TRUE were taken (strconv's words).
func TestStdinEOFExactly(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "cat", Stdin: api.StdinOpen})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	for _, v := range []string{"1", "TRUE", "t"} {
		status, body := d.raw(t, "POST", "/v1/processes/"+p.ID+"/stdin?eof="+v, "", authed())
		require.Equal(t, http.StatusBadRequest, status, "eof=%s: %s", v, body)
		require.Contains(t, errorMessage(t, body), "want true or false")
	}
	status, body := d.raw(t, "POST", "/v1/processes/"+p.ID+"/stdin?eof=true", "", authed())
	require.Equal(t, http.StatusNoContent, status, body)
}

// TestMaxConnections: past MaxConnections, with every connection serving
// a request (none idle, to be closed to make room), a connection is
// answered 429 resource_exhausted and closed at once; once one closes,
// another is served. Idle connections (20,000 after a GET /livez each, no
// token needed) took every descriptor the daemon had, and then no client
// could connect at all.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxConnections: 3})
	p := startClosing(t, d, `{"cmd":"sleep 120"}`)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	d.c.CloseIdleConnections()
	var held []net.Conn
	for range 3 {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "GET /v1/processes/%s/wait?timeout=120000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", p.ID, testToken)
		require.NoError(t, err)
		held = append(held, conn) // waiting on the process
	}
	over := func() *http.Response {
		conn := d.dial(t)
		defer conn.Close()
		_, _ = fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
			require.Equal(t, client.CodeResourceExhausted, errorCode(t, string(b)))
			require.Contains(t, string(b), "--max-connections")
		}
		return resp
	}
	require.Equal(t, http.StatusTooManyRequests, over().StatusCode)
	// A client that sends its whole body before it reads the answer gets
	// the 429 too: it got a broken pipe from its write, the connection
	// closed under it as soon as the answer was written. The daemon reads
	// a refused body for a second at most, and stops at 300 ms without a
	// byte: this client, slower than that on a loaded machine, saw a
	// reset. Those bounds are lengthened here into hang guards.
	server.SetRefuseTimes(d.srv, 30*time.Second, 10*time.Second)
	conn := d.dial(t)
	const size = 8 << 20
	_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", testToken, size)
	require.NoError(t, err)
	_, err = conn.Write(bytes.Repeat([]byte(" "), size))
	require.NoError(t, err, "the whole body is sent")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	conn.Close() // the daemon, still reading it, lets it go
	held[0].Close()
	require.Eventually(t, func() bool { return over().StatusCode == http.StatusOK }, 30*time.Second, 20*time.Millisecond,
		"a connection is served once one has closed")
}

// startClosing starts a process on a connection of its own that asks the
// daemon to close it once answered, read to its end (see closing): a
// client's connection whose answer had come, but whose request the daemon
// was still finishing (neither idle, to be closed to make room, nor
// closed), took a place for a moment, and a connection a test meant to
// hold was refused.
func startClosing(t *testing.T, d *daemon, body string) api.Process {
	t.Helper()
	status, b := d.closing(t, "POST", "/v1/processes", body)
	require.Equal(t, http.StatusCreated, status, b)
	var p api.Process
	require.NoError(t, json.Unmarshal([]byte(b), &p))
	return p
}

// closing sends a request with the token and a body (JSON, when not
// empty) on a connection of its own, asking the daemon to close it once
// answered, and returns the answer's status and body; once the daemon
// closed the connection, when the answer is a 2xx: by then the daemon no
// longer counts it under MaxConnections.
func (d *daemon) closing(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	conn := d.dial(t)
	defer conn.Close()
	_, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", method, path, testToken, len(body), body)
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		rest, err := io.ReadAll(br)
		require.NoError(t, err, "the daemon closes the connection")
		require.Empty(t, rest)
	}
	return resp.StatusCode, string(b)
}

// TestHeadersBudget: the bytes of headers being read at once are bounded,
// past each request's first 16 KiB: connections that stop inside a header
// of near 1 MiB (the limit) are answered 429 and closed once 64 MiB of them
// are held, rather than held, 1 MiB each, until the 10 s header timeout. A
// request with everyday headers is served meanwhile.
func TestHeadersBudget(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	const conns = 120
	head := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + strings.Repeat("a", 1<<20-100) // never ends
	held := make([]net.Conn, 0, conns)
	closed := 0
	for range conns {
		conn := d.dial(t)
		if _, err := io.WriteString(conn, head); err != nil {
			closed++ // as it was written: reset
			continue
		}
		held = append(held, conn)
	}
	// Well before the header timeout, at which those it holds close.
	until := time.Now().Add(3 * time.Second)
	var answered atomic.Int64
	var wg sync.WaitGroup
	for _, conn := range held {
		require.NoError(t, conn.SetReadDeadline(until))
		wg.Go(func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			switch {
			case err == nil:
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode == http.StatusTooManyRequests && strings.Contains(string(b), string(client.CodeResourceExhausted)) {
					answered.Add(1)
				}
			case !errors.Is(err, os.ErrDeadlineExceeded):
				answered.Add(1) // reset as the answer came
			}
		})
	}
	wg.Wait()
	closed += int(answered.Load())
	// 64 MiB holds 65 of them, each past its first 16 KiB.
	require.GreaterOrEqual(t, closed, conns-66, "connections closed past the budget")
	resp, err := http.Get(d.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestManyElementsRefusedCheaply: a body of many small array elements or
// object members is refused before they are decoded, at a cost near the
// body's own: each is worth far more decoded than its few bytes of JSON
// (16 bytes of a string's header for the 3 of "",), and 16 MB of empty
// argv elements took some 250 MB to decode only to be refused for the
// command's size; 2 million env keys, 260 MB and 3.7 s of a core, and the
// process was started. Not parallel: the whole process's allocations are
// measured.
func TestManyElementsRefusedCheaply(t *testing.T) {
	d := start(t, server.Options{})
	argv := `{"argv":["true"` + strings.Repeat(`,""`, 5_500_000) + `]}`
	var env strings.Builder
	env.WriteString(`{"argv":["true"],"env":{`)
	for i := range 1_200_000 {
		if i > 0 {
			env.WriteByte(',')
		}
		fmt.Fprintf(&env, `"%x":""`, i)
	}
	env.WriteString(`}}`)
	for _, body := range []string{argv, env.String()} {
		var code int
		var answer string
		allocated := heaptest.Allocated(func() { code, answer = d.raw(t, "POST", "/v1/processes", body, authed()) })
		t.Logf("a body of %d bytes: %d MiB allocated", len(body), allocated>>20)
		require.Equal(t, http.StatusRequestEntityTooLarge, code, "%.300s", answer)
		require.Contains(t, errorMessage(t, answer), "elements")
		// Its buffer, and the elements checked until the budget was
		// spent: a few times the body, not the twenty it cost.
		require.Less(t, allocated, 3*uint64(len(body)), "a body of %d bytes allocated %d MiB", len(body), allocated>>20)
	}
}

// TestBodyElementsCounted: each array element and object member of a body
// counts 256 bytes under the bodies' budget, twice --body-limit, besides
// the body's bytes: a body whose elements take it past the whole budget is
// refused 413, however small its text; one within it is taken.
func TestBodyElementsCounted(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{BodyLimit: 64 << 10}) // a budget of 512 elements' worth
	argv := func(n int) string { return `{"argv":["true"` + strings.Repeat(`,""`, n) + `]}` }
	env := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"argv":["true"],"env":{"k":""`)
		for i := range n {
			fmt.Fprintf(&b, `,"k%d":""`, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	for _, body := range []string{argv(400), env(400)} {
		code, answer := d.raw(t, "POST", "/v1/processes/run", body, authed())
		require.Equal(t, http.StatusOK, code, "%.300s", answer)
	}
	for _, body := range []string{argv(600), env(600)} {
		code, answer := d.raw(t, "POST", "/v1/processes/run", body, authed())
		require.Equal(t, http.StatusRequestEntityTooLarge, code, "%.300s", answer)
		require.Equal(t, client.CodePayloadTooLarge, errorCode(t, answer))
		require.Contains(t, errorMessage(t, answer), "too many array elements and object members")
		require.Contains(t, errorMessage(t, answer), "twice --body-limit")
		// It names the body's size, not its buffer's (one byte more, to
		// read its end), and how many elements a body of that size may
		// hold: what the client can act on.
		require.Contains(t, errorMessage(t, answer), fmt.Sprintf("a body of %d bytes", len(body)))
		most := (2*(64<<10) - (len(body) + 1)) / 256
		require.Contains(t, errorMessage(t, answer), fmt.Sprintf("at most %d array elements and object members", most))
	}
}
