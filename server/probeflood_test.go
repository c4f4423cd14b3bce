package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/server"
)

// flood asks for /metrics at addr from n clients at once until ctx is
// done: half on keep-alive connections, half on a new connection each
// time, each asking again as soon as it has its answer, refused or not.
func flood(ctx context.Context, addr string, n int) (wait func()) {
	var wg sync.WaitGroup
	for i := range n {
		tr := &http.Transport{DisableKeepAlives: i%2 == 1, MaxIdleConnsPerHost: 1}
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		wg.Go(func() {
			defer tr.CloseIdleConnections()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	return wg.Wait
}

// floodUnread opens connections to addr as fast as it can until ctx is
// done, each sending a whole request for /metrics and never reading, and
// holds the last held of them open (each one past that closes the oldest).
func floodUnread(ctx context.Context, addr string, held int) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		req := []byte("GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")
		for ctx.Err() == nil {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				continue
			}
			_, _ = c.Write(req)
			if open = append(open, c); len(open) > held {
				open[0].Close()
				open = open[1:]
			}
		}
	})
	return wg.Wait
}

// TestProbesAnsweredUnderMetricsFlood: the kubelet's probes on the metrics
// listener are answered while clients flood it with scrapes, keep-alive
// and new connections alike. Every place of the listener held a scrape
// being served, none idle, and 0 to 2 of 40 probes were refused (429) or
// had their connection closed: three failed liveness probes in a row
// restart the container. The probes ask as the kubelet does, one every
// 50 ms on a connection of their own; a probe fails when it is not
// answered 200, not when it is slow (the timeout is a hang guard).
func TestProbesAnsweredUnderMetricsFlood(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	require.Eventually(t, func() bool { return d.srv.Ready() == nil }, 30*time.Second, 10*time.Millisecond)
	addr := serveMetricsListener(t, d)

	fctx, stop := context.WithCancel(context.Background())
	wait := flood(fctx, addr, 4*server.MetricsMaxConnections)
	// And connections that send a whole request and read nothing, faster
	// than the listener looks at their requests: a probe's, its request
	// come, was closed, unread, as the oldest of those whose request had
	// not been looked at, and its client saw a reset.
	waitUnread := floodUnread(fctx, addr, 2000)
	defer func() { stop(); wait(); waitUnread() }()
	time.Sleep(200 * time.Millisecond) // the flood is under way

	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var failed atomic.Int32
	var why []string
	for i := range 40 {
		path := []string{"/livez", "/readyz"}[i%2]
		resp, err := probe.Get("http://" + addr + path)
		switch {
		case err != nil:
			failed.Add(1)
			why = append(why, fmt.Sprintf("%s: %v", path, err))
		default:
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				why = append(why, fmt.Sprintf("%s: %d %s", path, resp.StatusCode, b))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Zero(t, failed.Load(), "probes failed under a flood of scrapes: %v", why)
}
