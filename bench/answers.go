package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/server"
)

// measureP5b is this process's peak RSS growth (it is the daemon) while 8
// sessions each run a command printing 128 MiB (32 MiB in -quick), half
// zeros and half random bytes, and 8 clients fetch their run answers at
// once. The clients read the answers through a small buffer and keep only
// their last bytes, so that what grows is the daemon's memory, not theirs.
func measureP5b(ctx context.Context, cfg config) Row {
	const runs = 8
	size := int64(128 << 20)
	if cfg.quick {
		size = 32 << 20
	}
	d, err := startDaemon()
	if err != nil {
		return failed(err)
	}
	defer d.stop()
	ids := make([]string, runs)
	for i := range ids {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := d.c.CreateSession(sctx, client.SessionOptions{})
		cancel()
		if err != nil {
			return failed(err)
		}
		ids[i] = s.ID
	}
	before, err := settledRSS()
	if err != nil {
		return failed(err)
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return notMeasured("cannot reset the peak RSS: " + err.Error())
	}
	cmd := fmt.Sprintf(`{"cmd":"head -c %d /dev/zero; head -c %d /dev/urandom"}`, size/2, size/2)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		total int64
	)
	t := time.Now()
	for _, id := range ids {
		wg.Go(func() {
			n, err := fetchAnswer(ctx, d, "/v1/sessions/"+id+"/commands/run", cmd)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t)
	peak, err := statusKiB("self", "VmHWM")
	if err != nil {
		return failed(err)
	}
	if len(errs) > 0 {
		return failed(fmt.Errorf("%d of %d runs failed, first: %w", len(errs), runs, errs[0]))
	}
	const retention = logstore.DefaultRetention >> 10 // KiB
	const limit = server.DefaultOutputLimit >> 10     // KiB
	target := int64(runs*(retention+limit) + 32<<10)
	growth := peak - before
	return Row{
		Value:    fmt.Sprintf("%d KiB", growth),
		Baseline: fmt.Sprintf("%d KiB retention", retention),
		Ratio:    float64(growth) / retention,
		Target:   "≤ 8 × (retention + outputLimit) + 32 MiB",
		Met:      yesNo(growth <= target),
		Note: fmt.Sprintf("%d × %d MiB, answers of %d KiB on average in %s; target %d KiB; RSS %d KiB before, VmHWM %d KiB after",
			runs, size>>20, total/runs>>10, dur(elapsed), target, before, peak),
	}
}

// fetchAnswer posts body to path and reads the answer to its end, keeping
// only its last bytes: it returns the answer's size, and an error unless it
// is a 200 RunResult that says it omitted output and ends as one.
func fetchAnswer(ctx context.Context, d *daemon, path, body string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	end := &lastBytes{n: 512}
	n, err := io.Copy(end, resp.Body)
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(end.b, []byte(`"omittedBytes":`)) || !bytes.HasSuffix(end.b, []byte("}\n")) {
		return n, fmt.Errorf("answer %d ends %q", resp.StatusCode, end.b)
	}
	return n, nil
}

// lastBytes is a writer that keeps the last n bytes written to it.
type lastBytes struct {
	b []byte
	n int
}

func (w *lastBytes) Write(p []byte) (int, error) {
	w.b = append(w.b, p[max(0, len(p)-w.n):]...)
	w.b = w.b[max(0, len(w.b)-w.n):]
	return len(p), nil
}
