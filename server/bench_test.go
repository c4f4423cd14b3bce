package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	cexec "github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/httpfloor"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/server"
	"github.com/conchsh/conch/shellsession"
)

// forkBashTrue is the baseline of docs/performance.md: fork and wait
// `bash -c true` from Go.
func forkBashTrue(b *testing.B) {
	cmd := exec.Command("bash", "-c", "true")
	if err := proctree.Start(cmd); err != nil {
		b.Fatal(err)
	}
	if err := proctree.Wait(cmd); err != nil {
		b.Fatal(err)
	}
}

// alternate times op and the baseline in turn, one of each per iteration
// (then after, untimed, when it is not nil), and reports the medians, op's
// p99 and the ratio of the medians against target.
func alternate(b *testing.B, target float64, op, after func()) {
	var ops, base []time.Duration
	for b.Loop() {
		t0 := time.Now()
		op()
		t1 := time.Now()
		forkBashTrue(b)
		ops = append(ops, t1.Sub(t0))
		base = append(base, time.Since(t1))
		if after != nil {
			after()
		}
	}
	slices.Sort(ops)
	slices.Sort(base)
	med, baseMed := ops[len(ops)/2], base[len(base)/2]
	p99 := ops[min(len(ops)-1, len(ops)*99/100)]
	ratio := float64(med) / float64(baseMed)
	b.ReportMetric(float64(med.Microseconds()), "µs-median")
	b.ReportMetric(float64(p99.Microseconds()), "µs-p99")
	b.ReportMetric(float64(baseMed.Microseconds()), "µs-baseline")
	b.ReportMetric(ratio, "ratio")
	met := "met"
	if ratio > target {
		met = "NOT met"
	}
	b.Logf("n=%d median %v p99 %v, fork-and-wait bash -c true %v: ratio %.3f (target ≤ %.2f: %s)",
		len(ops), med, p99, baseMed, ratio, target, met)
}

// BenchmarkP2SessionTrueHTTP is P2: the round trip of `true` in a session
// over HTTP (POST /v1/sessions/{id}/commands/run).
func BenchmarkP2SessionTrueHTTP(b *testing.B) {
	d := start(b, server.Options{})
	c := ctx(b)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(b, err)
	opts := client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true"}}
	alternate(b, 0.10, func() {
		r, _, err := d.c.RunCommand(c, s.ID, opts)
		if err != nil || r == nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("run true: %v %+v", err, r)
		}
	}, nil)
}

// BenchmarkP3OneShotTrueHTTP is P3: one-shot `true` over HTTP
// (POST /v1/processes/run).
func BenchmarkP3OneShotTrueHTTP(b *testing.B) {
	d := start(b, server.Options{})
	c := ctx(b)
	opts := client.RunOptions{StartOptions: client.StartOptions{Cmd: "true"}}
	alternate(b, 1.2, func() {
		r, _, err := d.c.Run(c, opts)
		if err != nil || r == nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("run true: %v %+v", err, r)
		}
	}, nil)
}

// BenchmarkHealthz is the floor of any route: one HTTP round trip to the
// daemon on loopback.
func BenchmarkHealthz(b *testing.B) {
	d := start(b, server.Options{})
	c := ctx(b)
	for b.Loop() {
		if _, err := d.c.Health(c); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the user and system CPU this process has used: the daemon's
// and its client's, not the shells'.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHTTPPath is what HTTP adds to a session command (P2 − P1): a
// run of `true` over HTTP (POST /v1/sessions/{id}/commands/run, the Go
// client) against a run of `true` in an embedded session, in turn, with
// the medians' difference in wall time and the difference in this
// process's CPU (daemon and client) per command. Beside them, in the same
// turns, the floor: net/http alone around `true` in an embedded session of
// its own (package httpfloor), which no daemon on net/http can beat;
// µs-own is what conch adds to it (path − floor).
func BenchmarkHTTPPath(b *testing.B) {
	d := start(b, server.Options{})
	c := ctx(b)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(b, err)
	emb := benchSession(b)
	opts := client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true"}}
	overHTTP := func() {
		r, _, err := d.c.RunCommand(c, s.ID, opts)
		if err != nil || r == nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("run true over HTTP: %v %+v", err, r)
		}
	}
	embedded := func() { runTrue(b, emb) }
	floorSession := benchSession(b)
	bareServer, err := httpfloor.Serve(func() error { runTrue(b, floorSession); return nil })
	require.NoError(b, err)
	defer bareServer.Close()
	bare := func() {
		if err := bareServer.RoundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	walls, cpu := inTurns(b, overHTTP, embedded, bare)
	n := time.Duration(len(walls[0]))
	path, floor := medianDiff(walls[0], walls[1]), medianDiff(walls[2], walls[1])
	b.ReportMetric(float64(median(walls[0]).Microseconds()), "µs-http")
	b.ReportMetric(float64(median(walls[1]).Microseconds()), "µs-embedded")
	b.ReportMetric(float64(path.Microseconds()), "µs-path")
	b.ReportMetric(float64(floor.Microseconds()), "µs-floor")
	b.ReportMetric(float64((path - floor).Microseconds()), "µs-own")
	b.ReportMetric(float64((cpu[0]-cpu[1])/n)/1e3, "µs-path-cpu")
	b.ReportMetric(float64((cpu[2]-cpu[1])/n)/1e3, "µs-floor-cpu")
	b.Logf("n=%d: over HTTP %v, embedded %v, bare net/http %v; medians of the differences: path %v, floor %v; CPU of this process per command %v, %v, %v",
		n, median(walls[0]), median(walls[1]), median(walls[2]), path, floor, cpu[0]/n, cpu[1]/n, cpu[2]/n)
}

// inTurns runs ops in turn, each once per iteration after one run of each
// to warm up, and returns each op's wall times and the CPU this process
// (daemon and client) spent in its runs.
func inTurns(b *testing.B, ops ...func()) (walls [][]time.Duration, cpu []time.Duration) {
	for _, op := range ops {
		op()
	}
	walls, cpu = make([][]time.Duration, len(ops)), make([]time.Duration, len(ops))
	for b.Loop() {
		for i, op := range ops {
			c0, t0 := cpuTime(b), time.Now()
			op()
			walls[i] = append(walls[i], time.Since(t0))
			cpu[i] += cpuTime(b) - c0
		}
	}
	return walls, cpu
}

// median returns the median of d.
func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// medianDiff returns the median of the differences a[i] − base[i]: of runs
// made one after the other, so that a drifting load weighs on both alike.
func medianDiff(a, base []time.Duration) time.Duration {
	diff := make([]time.Duration, len(a))
	for i := range a {
		diff[i] = a[i] - base[i]
	}
	return median(diff)
}

// benchSession is an embedded bash session, closed at the benchmark's end.
func benchSession(b *testing.B) *shellsession.Session {
	s, err := shellsession.New(ctx(b), shellsession.Options{})
	require.NoError(b, err)
	b.Cleanup(func() {
		s.Close()
		<-s.Done()
	})
	return s
}

func runTrue(b *testing.B, s *shellsession.Session) {
	_, r, err := s.Run(ctx(b), shellsession.CommandOptions{Cmd: "true"})
	if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		b.Fatalf("run true embedded: %v %+v", err, r)
	}
}

// BenchmarkOneShotPath is what HTTP adds to a one-shot (P3 against its
// embedded run): `true` run over HTTP (POST /v1/processes/run, the Go
// client) against the same one-shot embedded (package exec), in turn, with
// the medians' difference in wall time and the difference in this
// process's CPU (daemon and client) per one-shot; beside them, in the same
// turns, the same request written and read raw on a connection of its own
// (µs-path-raw: the daemon's part without the Go client's), and the floor:
// net/http alone around fork-and-wait (package httpfloor). µs-own is what
// conch adds to the floor (path − floor).
//
//	go test -run '^$' -bench OneShotPath -benchtime 2000x ./server
func BenchmarkOneShotPath(b *testing.B) {
	d := start(b, server.Options{})
	c := ctx(b)
	opts := client.RunOptions{StartOptions: client.StartOptions{Cmd: "true", KeepLogs: "none"}}
	overHTTP := func() {
		r, _, err := d.c.Run(c, opts)
		if err != nil || r == nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("run true over HTTP: %v %+v", err, r)
		}
	}
	embedded := func() {
		p, err := cexec.Start(cexec.Options{Cmd: "true", KeepLogs: "none"})
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
	}
	bareServer, err := httpfloor.Serve(func() error { forkBashTrue(b); return nil })
	require.NoError(b, err)
	defer bareServer.Close()
	bare := func() {
		if err := bareServer.RoundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", d.addr)
	require.NoError(b, err)
	defer conn.Close()
	body := `{"cmd":"true","keepLogs":"none"}`
	req := "POST /v1/processes/run HTTP/1.1\r\nHost: " + d.addr + "\r\nAuthorization: Bearer " + testToken +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	br := bufio.NewReader(conn)
	raw := func() {
		if _, err := io.WriteString(conn, req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(out), `"exitCode":0`) {
			b.Fatalf("raw: %v %d %s", err, resp.StatusCode, out)
		}
	}
	walls, cpu := inTurns(b, overHTTP, embedded, bare, raw)
	n := time.Duration(len(walls[0]))
	path, floor, rawPath := medianDiff(walls[0], walls[1]), medianDiff(walls[2], walls[1]), medianDiff(walls[3], walls[1])
	b.ReportMetric(float64(median(walls[0]).Microseconds()), "µs-http")
	b.ReportMetric(float64(median(walls[1]).Microseconds()), "µs-embedded")
	b.ReportMetric(float64(path.Microseconds()), "µs-path")
	b.ReportMetric(float64(rawPath.Microseconds()), "µs-path-raw")
	b.ReportMetric(float64(floor.Microseconds()), "µs-floor")
	b.ReportMetric(float64((path - floor).Microseconds()), "µs-own")
	b.ReportMetric(float64((cpu[0]-cpu[1])/n)/1e3, "µs-path-cpu")
	b.ReportMetric(float64((cpu[3]-cpu[1])/n)/1e3, "µs-path-raw-cpu")
	b.ReportMetric(float64((cpu[2]-cpu[1])/n)/1e3, "µs-floor-cpu")
	b.Logf("n=%d: over HTTP %v, raw %v, embedded %v, bare net/http %v; medians of the differences: path %v, raw %v, floor %v; CPU of this process per one-shot %v, %v, %v, %v",
		n, median(walls[0]), median(walls[3]), median(walls[1]), median(walls[2]), path, rawPath, floor, cpu[0]/n, cpu[3]/n, cpu[1]/n, cpu[2]/n)
}
