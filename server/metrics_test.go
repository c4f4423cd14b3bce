package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/server"
)

// scrape reads the metrics at url+path, with the token when authed, and
// parses them with the Prometheus text parser.
func scrape(t *testing.T, url string, header http.Header) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), "GET", url+"/metrics", nil)
	require.NoError(t, err)
	req.Header = header
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value is the value of the metric of family name whose labels include
// want; ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		match := true
		for k, wv := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == wv {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.Counter.GetValue(), true
		case dto.MetricType_GAUGE:
			return m.Gauge.GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogBudget: 64 << 20})
	c := ctx(t)
	cwd := t.TempDir()

	// Work of each kind, whose ids, paths and text must not become labels.
	const secret = "metrics-label-secret"
	r := d.run(t, client.StartOptions{Cmd: "echo " + secret, Cwd: cwd})
	s, err := d.c.CreateSession(c, client.SessionOptions{Cwd: cwd})
	require.NoError(t, err)
	rc := d.runIn(t, s.ID, "echo "+secret+"; (exit 4)")
	reader, err := d.c.Start(c, client.StartOptions{Cmd: "read line; echo $line", Stdin: "open"})
	require.NoError(t, err)
	for {
		p, err := d.c.Get(c, reader.ID)
		require.NoError(t, err)
		if p.WaitingForInput {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, _ := d.raw(t, "GET", "/v1/processes/"+r.ProcessID+"/nothing-here", "", authed())
	require.Equal(t, http.StatusNotFound, code)

	code, _ = d.raw(t, "GET", "/metrics", "", nil)
	require.Equal(t, http.StatusUnauthorized, code, "the API's listener serves metrics behind the token")
	fams := scrape(t, d.url, authed())

	types := map[string]dto.MetricType{
		"conch_sessions":                      dto.MetricType_GAUGE,
		"conch_processes":                     dto.MetricType_GAUGE,
		"conch_commands_total":                dto.MetricType_COUNTER,
		"conch_command_duration_seconds":      dto.MetricType_HISTOGRAM,
		"conch_log_retained_bytes":            dto.MetricType_GAUGE,
		"conch_log_evicted_bytes_total":       dto.MetricType_COUNTER,
		"conch_budget_bytes":                  dto.MetricType_GAUGE,
		"conch_budget_used_bytes":             dto.MetricType_GAUGE,
		"conch_http_requests_total":           dto.MetricType_COUNTER,
		"conch_http_request_duration_seconds": dto.MetricType_HISTOGRAM,
		"conch_input_waiting":                 dto.MetricType_GAUGE,
		"conch_containment":                   dto.MetricType_GAUGE,
		"go_goroutines":                       dto.MetricType_GAUGE,
		"process_cpu_seconds_total":           dto.MetricType_COUNTER,
	}
	for name, typ := range types {
		require.Contains(t, fams, name)
		require.Equal(t, typ, fams[name].GetType(), name)
	}

	for _, m := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"conch_sessions", nil, 1},
		{"conch_processes", map[string]string{"kind": "session", "state": "running"}, 1},
		{"conch_processes", map[string]string{"kind": "exec", "state": "terminal"}, 1},
		{"conch_processes", map[string]string{"kind": "command", "state": "terminal"}, 1},
		{"conch_commands_total", map[string]string{"kind": "exec", "reason": "exited"}, 1},
		{"conch_commands_total", map[string]string{"kind": "command", "reason": "exited"}, 1},
		{"conch_command_duration_seconds", map[string]string{"kind": "exec"}, 1},
		{"conch_budget_bytes", map[string]string{"budget": "logs"}, 64 << 20},
		{"conch_budget_used_bytes", map[string]string{"budget": "logs"}, float64(len(secret))},
		{"conch_log_retained_bytes", nil, float64(len(secret))},
		{"conch_http_requests_total", map[string]string{"route": "POST /v1/processes/run", "code": "200"}, 1},
		{"conch_http_requests_total", map[string]string{"route": "/", "code": "404"}, 1},
		{"conch_http_request_duration_seconds", map[string]string{"route": "POST /v1/sessions"}, 1},
		{"conch_input_waiting", nil, 1},
		{"conch_containment", map[string]string{"mode": "none"}, 1},
	} {
		v, ok := value(fams, m.name, m.labels)
		require.True(t, ok, "%s%v is missing", m.name, m.labels)
		require.GreaterOrEqual(t, v, m.min, "%s%v", m.name, m.labels)
	}
	require.Equal(t, api.Exited, rc.Reason)
	v, _ := value(fams, "conch_sessions", nil)
	require.Equal(t, 1.0, v)

	// No label holds an id, a path or command text: labels are route
	// patterns and values from fixed sets.
	forbidden := []string{r.ProcessID, s.ID, rc.ProcessID, reader.ID, cwd, secret, "nothing-here"}
	for name, f := range fams {
		if !strings.HasPrefix(name, "conch_") {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				for _, bad := range forbidden {
					require.NotContains(t, l.GetValue(), bad, "%s{%s}", name, l.GetName())
				}
				if l.GetName() == "route" {
					require.Regexp(t, `^(/|(GET|POST|DELETE) /[a-z0-9/{}]*)$`, l.GetValue())
				} else {
					require.Regexp(t, `^[a-z0-9_]+$`, l.GetValue(), "%s{%s}", name, l.GetName())
				}
			}
		}
	}
}

func TestMetricsContainmentAndListener(t *testing.T) {
	t.Parallel()
	root := containment.Open(containment.Config{Instance: "metrics-test-" + strconv.Itoa(os.Getpid())})
	t.Cleanup(func() { _ = root.Destroy() })
	mode := string(root.Mode())
	d := start(t, server.Options{Containment: root})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- d.srv.ServeMetrics(ln) }()
	m := &daemon{url: "http://" + ln.Addr().String()}

	fams := scrape(t, m.url, nil) // no token on the metrics listener
	v, ok := value(fams, "conch_containment", map[string]string{"mode": mode})
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	for _, other := range []string{"none", "cgroup2"} {
		if other != mode {
			_, ok = value(fams, "conch_containment", map[string]string{"mode": other})
			require.False(t, ok, "only the daemon's own mode is reported")
		}
	}

	code, _ := m.raw(t, "GET", "/livez", "", nil)
	require.Equal(t, http.StatusOK, code)
	code, _ = m.raw(t, "GET", "/readyz", "", nil)
	require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code)
	code, _ = m.raw(t, "POST", "/v1/processes", `{"cmd":"true"}`, authed())
	require.Equal(t, http.StatusNotFound, code, "the metrics listener serves no API")
	// Nor redirects a path it would clean, nor answers OPTIONS * itself.
	code, _ = m.raw(t, "GET", "/metrics/../livez", "", nil)
	require.Equal(t, http.StatusNotFound, code)
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "OPTIONS * HTTP/1.1\r\nHost: evil.com\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	require.NoError(t, d.srv.Shutdown(ctx(t)))
	require.NoError(t, <-served, "Shutdown ends the metrics listener too")
}

// TestMetricsSessionsAtEnd: a session whose end a client has seen no
// longer counts in conch_sessions, as it no longer counts against
// --max-sessions. The gauge read the count that the session's watcher
// lowers after the end is answered, and showed it still live most times.
func TestMetricsSessionsAtEnd(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	for i := range 20 {
		s, err := d.c.CreateSession(c, client.SessionOptions{})
		require.NoError(t, err)
		_, _, err = d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "exit 0"}})
		require.NoError(t, err)
		got, err := d.c.Session(c, s.ID)
		require.NoError(t, err)
		require.Equal(t, api.Terminal, got.State)
		v, _ := value(scrape(t, d.url, authed()), "conch_sessions", nil)
		require.Zero(t, v, "round %d of 20: the session that ended still counts", i+1)
	}
}

// abandonWait makes a request whose client goes away before its answer: a
// wait for a process that runs on, given up after 200 ms.
func abandonWait(t *testing.T, d *daemon) {
	t.Helper()
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "sleep 60"})
	require.NoError(t, err)
	t.Cleanup(func() { d.c.Kill(context.Background(), p.ID, client.KillOptions{Signal: "KILL"}) })
	wctx, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	_, _, err = d.c.Wait(wctx, p.ID, 30*time.Second)
	require.Error(t, err)
}

// TestMetricsClientGone: a request whose client went away before its
// answer is counted under code 499, as proxies count it, not under "0".
func TestMetricsClientGone(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	abandonWait(t, d)
	route := map[string]string{"route": "GET /v1/processes/{id}/wait", "code": "499"}
	require.Eventually(t, func() bool {
		n, ok := value(scrape(t, d.url, authed()), "conch_http_requests_total", route)
		return ok && n == 1
	}, 30*time.Second, 20*time.Millisecond)
	_, ok := value(scrape(t, d.url, authed()), "conch_http_requests_total", map[string]string{"code": "0"})
	require.False(t, ok, "no request is counted under code 0")
}

// serveMetricsListener serves d's metrics listener on a loopback port of
// its own and returns its address; the test's end shuts d down.
func serveMetricsListener(t *testing.T, d *daemon) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- d.srv.ServeMetrics(ln) }()
	t.Cleanup(func() {
		require.NoError(t, d.srv.Shutdown(context.Background()))
		require.NoError(t, <-served)
	})
	return ln.Addr().String()
}

// metricsGet sends GET path to the metrics listener at addr on a connection
// of its own, with extra headers added, and returns the connection, kept
// open, with the answer, its body read.
func metricsGet(t *testing.T, addr, path, extra string) (net.Conn, *http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path, extra)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return conn, resp, string(b)
}

// idleConn opens a connection to addr that sends nothing, closed when the
// test ends at the latest.
func idleConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// The metrics listener, which needs no token, bounds its connections as
// the API's does (--max-connections), and lets idle ones go soon: it had
// no bound and kept an idle connection 2 minutes, and a few hundred idle
// ones took every descriptor the daemon had. Only when every connection it
// holds is serving a request is one more answered 429 resource_exhausted
// and closed; a place given back is taken again.
func TestMetricsListenerBounded(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	// A request whose body has not come holds its connection, serving,
	// while the daemon reads the rest of the body after the answer.
	server.SetReadRest(d.srv, 1<<20, time.Minute)
	addr := serveMetricsListener(t, d)

	var held []net.Conn
	var answers []*http.Response
	for range server.MetricsMaxConnections {
		conn := idleConn(t, addr)
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err := fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
		require.NoError(t, err)
		// The answer's status and headers come at once; its end, once
		// the request has ended.
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		held, answers = append(held, conn), append(answers, resp)
	}
	_, resp, b := metricsGet(t, addr, "/livez", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, b, `"code":"resource_exhausted"`)
	require.Contains(t, b, "metrics listener")

	// A request that ends gives its place back, and it is taken again.
	_, err := held[0].Write(make([]byte, 100))
	require.NoError(t, err)
	_, err = io.ReadAll(answers[0].Body)
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second) // a hang guard: the place is given back once net/http has seen the body end
	for {
		_, resp, _ = metricsGet(t, addr, "/livez", "")
		if resp.StatusCode == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// An idle connection is let go (the hang guard is far past the idle
	// timeout), as is one that never sends its request.
	require.NoError(t, held[0].SetReadDeadline(time.Now().Add(60*time.Second)))
	_, err = held[0].Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "an idle connection to the metrics listener is closed")
	// It may be refused while the last answer's connection is still
	// serving, a moment after its client has the answer.
	deadline = time.Now().Add(30 * time.Second) // a hang guard
	for {
		silent := idleConn(t, addr)
		require.NoError(t, silent.SetReadDeadline(time.Now().Add(60*time.Second)))
		b, err := io.ReadAll(silent)
		if len(b) == 0 {
			require.NoError(t, err, "a connection that sends no request is closed")
			break
		}
		require.Contains(t, string(b), "429 Too Many Requests")
		require.True(t, time.Now().Before(deadline), "every connection refused")
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMetricsProbesOutlastIdleConnections: connections that send nothing,
// which need no token to open, cannot keep the kubelet's probes from the
// metrics listener, where the shipped manifests put the liveness probe:
// sixteen of them, reopened as they are closed, made every /livez answer
// 429, and the kubelet restarted the container, every session with it.
// One past the bound closes the connection idle longest instead.
func TestMetricsProbesOutlastIdleConnections(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	require.Eventually(t, func() bool { return d.srv.Ready() == nil }, 30*time.Second, 10*time.Millisecond)
	addr := serveMetricsListener(t, d)

	for range 2 * server.MetricsMaxConnections {
		idleConn(t, addr)
	}
	// Some have kept their connection open after an answer, idle too.
	for range server.MetricsMaxConnections {
		_, resp, _ := metricsGet(t, addr, "/metrics", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	for round := range 20 {
		for _, path := range []string{"/livez", "/readyz"} {
			idleConn(t, addr) // the peer opens another as each is closed
			_, resp, b := metricsGet(t, addr, path, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, "round %d of 20, %s: %s", round+1, path, b)
		}
	}
}

// TestMetricsProbesOutlastSlowReaders: connections that ask for the
// metrics many times over and never read the answers cannot keep the
// probes out either. Sixteen of them, each with a small receive buffer,
// held every place with a handler stuck writing, never idle, and every
// /livez answered 429 for as long as they stayed; one stuck in a write
// for over a second is now closed to make room, as an idle one is. The
// metrics listener's own bound on a write is made long here, so that it
// is not what lets the probes in.
func TestMetricsProbesOutlastSlowReaders(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	require.Eventually(t, func() bool { return d.srv.Ready() == nil }, 30*time.Second, 10*time.Millisecond)
	server.SetMetricsWriteTimeout(d.srv, 10*time.Minute)
	addr := serveMetricsListener(t, d)

	// A receive buffer this small, set before the connection is made,
	// holds a few answers at most.
	small := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	requests := []byte(strings.Repeat("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 1000))
	slowReader := func() {
		conn, err := small.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = conn.Write(requests)
		require.NoError(t, err)
		// Its first answer has begun: it holds a place, serving.
		_, err = io.ReadFull(conn, make([]byte, 1))
		require.NoError(t, err)
	}
	// probe asks for path as the kubelet does, on a connection of its
	// own closed after the answer, until it is answered 200: it may be
	// refused while no handler has been stuck for a second.
	probe := func(path string) {
		deadline := time.Now().Add(30 * time.Second) // a hang guard
		for {
			conn, resp, b := metricsGet(t, addr, path, "")
			conn.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
			require.True(t, time.Now().Before(deadline), "no %s got past sixteen slow readers: %s", path, b)
			time.Sleep(100 * time.Millisecond)
		}
	}
	for range server.MetricsMaxConnections {
		slowReader()
	}
	probe("/livez")
	// The peer takes again every place given back.
	for range 5 {
		for _, path := range []string{"/livez", "/readyz"} {
			slowReader()
			probe(path)
		}
	}
}

// TestMetricsBodyCutShort: a request whose client went away while it sent
// its body is counted under 499, as one that went away before its answer:
// it was counted 400, as a malformed body ("read body: unexpected EOF").
// A malformed body that came whole is still 400.
func TestMetricsBodyCutShort(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	conn := d.dial(t)
	_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"cmd\":", testToken)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	code, _ := d.raw(t, "POST", "/v1/processes", `{"cmd":`, authed())
	require.Equal(t, http.StatusBadRequest, code)

	route := "POST /v1/processes"
	require.Eventually(t, func() bool {
		fams := scrape(t, d.url, authed())
		gone, _ := value(fams, "conch_http_requests_total", map[string]string{"route": route, "code": "499"})
		bad, _ := value(fams, "conch_http_requests_total", map[string]string{"route": route, "code": "400"})
		return gone == 1 && bad == 1
	}, 30*time.Second, 20*time.Millisecond, "one request counted 499, one 400")
}
