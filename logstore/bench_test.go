package logstore

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkReader hands out data at most size bytes per Read, like a pipe, and
// hides bytes.Reader's WriterTo so that io.Copy really copies.
type chunkReader struct {
	data []byte
	size int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.size)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// benchOutput returns n bytes of mixed output: mostly text, some binary.
func benchOutput(n int) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, pools()[len(out)/(1<<20)%2]...)
	}
	return out[:n]
}

// BenchmarkAppend measures io.Copy into a Log against io.Copy of the same
// data, read the same way, into io.Discard, alternating the two, and reports
// both throughputs and the median ratio (log/discard); the target is 0.5.
//
// The data comes from memory in reads of a given size, or through a pipe
// from another goroutine as a process's output does. From memory the
// baseline only reads memory while any store must also write it, so that
// ratio is bounded by memory bandwidth rather than by the log: the
// ceiling-ratio metric is the same comparison for a writer that only copies
// into a reused buffer of the retention's size.
func BenchmarkAppend(b *testing.B) {
	data := benchOutput(32 << 20)
	for _, size := range []int{32 << 10, 4 << 10, 512, 64} {
		b.Run(fmt.Sprintf("memory/read=%d", size), func(b *testing.B) {
			benchAppend(b, len(data), func() io.Reader { return &chunkReader{data, size} }, func() {})
		})
	}
	b.Run("pipe", func(b *testing.B) {
		var feeder sync.WaitGroup
		defer feeder.Wait()
		src := func() io.Reader {
			pr, pw, err := os.Pipe()
			require.NoError(b, err)
			feeder.Go(func() {
				defer pw.Close()
				for off := 0; off < len(data); off += 64 << 10 {
					if _, err := pw.Write(data[off:min(len(data), off+64<<10)]); !assert.NoError(b, err) {
						return
					}
				}
			})
			return onlyReader{pr}
		}
		benchAppend(b, len(data), src, feeder.Wait)
	})
}

// onlyReader hides an *os.File's WriteTo, so that both sides of the
// comparison read it the same way.
type onlyReader struct{ r *os.File }

func (r onlyReader) Read(p []byte) (int, error) { return r.r.Read(p) }

// benchAppend runs the comparison of BenchmarkAppend on n bytes from src,
// calling drained after each copy.
func benchAppend(b *testing.B, n int, src func() io.Reader, drained func()) {
	var ratios []float64
	var logTime, copyTime time.Duration
	copyAll := func(w io.Writer) time.Duration {
		r := src()
		start := time.Now()
		_, err := io.Copy(w, r)
		require.NoError(b, err)
		d := time.Since(start)
		if c, ok := r.(onlyReader); ok {
			c.r.Close()
		}
		drained()
		return d
	}
	ring := &ringWriter{buf: make([]byte, DefaultRetention)}
	var ceilings []float64
	for b.Loop() {
		dc := copyAll(io.Discard)
		l := New(Options{})
		dl := copyAll(l.Writer(Stdout))
		l.Close()
		dr := copyAll(ring)
		copyTime += dc
		logTime += dl
		ratios = append(ratios, float64(dc)/float64(dl))
		ceilings = append(ceilings, float64(dc)/float64(dr))
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * float64(n) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(logTime), "log-MB/s")
	b.ReportMetric(mbps(copyTime), "discard-MB/s")
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(median(ceilings), "ceiling-ratio")
}

// ringWriter copies writes round a buffer of the default retention: the
// least any store that keeps that much must do, with no allocation and no
// bookkeeping. Its ratio to io.Discard is the ceiling for the log's.
type ringWriter struct {
	buf []byte
	off int
}

func (r *ringWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		if r.off == len(r.buf) {
			r.off = 0
		}
		n := copy(r.buf[r.off:], rest)
		r.off += n
		rest = rest[n:]
	}
	return len(p), nil
}

// BenchmarkFollowers is P8 of docs/performance.md at the store's level: a writer
// appends 256 MiB (16 MiB with -short) in 32 KiB writes while 50 followers
// follow it as the daemon's streams do (FollowLent), against the same writer
// with no follower, alternating. It
// reports the median ratio of writer throughput (target 0.5) and checks that
// every follower got every frame or a warning for each gap.
func BenchmarkFollowers(b *testing.B) {
	total := 256 << 20
	if testing.Short() {
		total = 16 << 20
	}
	const followers = 50
	data := benchOutput(1 << 20)
	var ratios []float64
	var alone, followed time.Duration
	var warnings int
	for b.Loop() {
		d0, _ := writeFollowed(b, data, total, 0)
		d1, w := writeFollowed(b, data, total, followers)
		alone += d0
		followed += d1
		warnings += w
		ratios = append(ratios, float64(d0)/float64(d1))
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * float64(total) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(alone), "alone-MB/s")
	b.ReportMetric(mbps(followed), "followed-MB/s")
	b.ReportMetric(float64(warnings)/float64(b.N*followers), "warnings/follower")
	b.ReportMetric(median(ratios), "ratio")
}

// writeFollowed writes total bytes of data into a new log in 32 KiB writes
// with n followers attached, and returns how long the writer took and how
// many warnings the followers got.
func writeFollowed(b *testing.B, data []byte, total, n int) (time.Duration, int) {
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	l := New(Options{})
	l.Write(Stdout, []byte("start\n"))
	var started, done sync.WaitGroup
	started.Add(n)
	warnings := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		done.Go(func() {
			var prev Cursor
			var jump Cursor
			err := l.FollowLent(ctx, 0, func(e Event) bool {
				switch {
				case e.Warning != nil:
					warnings[i]++
					jump = e.Warning.FirstAvailable
				case e.Frame != nil:
					c := e.Frame.Cursor
					if c == 1 {
						started.Done()
					}
					if c != prev+1 && c != jump {
						errs[i] = fmt.Errorf("frame %d after %d without a warning", c, prev)
						return false
					}
					prev = c
				case e.End:
					if _, _, last := l.Bounds(); prev != last {
						errs[i] = fmt.Errorf("ended at %d, the log at %d", prev, last)
					}
				}
				return true
			})
			if err != nil {
				errs[i] = err
			}
		})
	}
	started.Wait()
	const write = 32 << 10
	start := time.Now()
	for written := 0; written < total; written += write {
		off := written % len(data)
		l.Write(Stdout, data[off:off+write])
	}
	l.Close()
	elapsed := time.Since(start)
	done.Wait()
	sum := 0
	for i := range n {
		require.Nil(b, errs[i], "follower %d: %v", i, errs[i])
		sum += warnings[i]
	}
	return elapsed, sum
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
