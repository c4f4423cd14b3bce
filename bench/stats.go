package main

import (
	"fmt"
	"slices"
	"time"
)

// samples are durations of repeated runs of one thing.
type samples []time.Duration

func (s samples) sorted() samples {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// quantile returns the q-th quantile (0..1) by nearest rank.
func (s samples) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.sorted()
	i := int(q*float64(len(c))+0.5) - 1
	return c[min(max(i, 0), len(c)-1)]
}

func (s samples) median() time.Duration { return s.quantile(0.5) }
func (s samples) p99() time.Duration    { return s.quantile(0.99) }

// spread is the interquartile range relative to the median: how much a
// figure moves from one repetition to the next.
func (s samples) spread() float64 {
	m := s.median()
	if m == 0 {
		return 0
	}
	return float64(s.quantile(0.75)-s.quantile(0.25)) / float64(m)
}

// alternate runs a and b in turn n times (after one unmeasured warm-up of
// each) so that both see the same machine load, and returns their samples.
// It stops at the first error.
func alternate(n int, a, b func() error) (sa, sb samples, err error) {
	if err := a(); err != nil {
		return nil, nil, err
	}
	if err := b(); err != nil {
		return nil, nil, err
	}
	for range n {
		t := time.Now()
		if err := a(); err != nil {
			return sa, sb, err
		}
		sa = append(sa, time.Since(t))
		t = time.Now()
		if err := b(); err != nil {
			return sa, sb, err
		}
		sb = append(sb, time.Since(t))
	}
	return sa, sb, nil
}

// latencyRow reports a round-trip figure against its baseline: the ratio of
// the medians, met when it is at most limit (limit 0: reference only).
func latencyRow(v, base samples, limit float64, target string) Row {
	ratio := float64(v.median()) / float64(base.median())
	r := Row{
		Value:    fmt.Sprintf("%s (p99 %s)", dur(v.median()), dur(v.p99())),
		Baseline: fmt.Sprintf("%s (p99 %s)", dur(base.median()), dur(base.p99())),
		Ratio:    ratio,
		Target:   target,
		Met:      "ref",
		Note: fmt.Sprintf("n=%d each, interquartile spread %.0f%% / %.0f%%, p99 ratio %.3f×",
			len(v), 100*v.spread(), 100*base.spread(), float64(v.p99())/float64(base.median())),
	}
	if limit > 0 {
		r.Met = yesNo(ratio <= limit)
	}
	return r
}

func notMeasured(why string) Row {
	return Row{Value: "not measured", Baseline: "-", Target: "-", Met: "-", Note: why}
}

func failed(err error) Row {
	return Row{Value: "error", Baseline: "-", Target: "-", Met: "no", Note: err.Error()}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// dur prints a duration with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.3gµs", float64(d)/float64(time.Microsecond))
	}
}

func rate(bytes int64, d time.Duration) string {
	return fmt.Sprintf("%.3g GB/s", float64(bytes)/d.Seconds()/1e9)
}
