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
	s, err := alternateAll(n, a, b)
	return s[0], s[1], err
}

// alternateAll is alternate for any number of things, run in turn in the
// order given.
func alternateAll(n int, fs ...func() error) ([]samples, error) {
	s := make([]samples, len(fs))
	for _, f := range fs {
		if err := f(); err != nil {
			return s, err
		}
	}
	for range n {
		for i, f := range fs {
			t := time.Now()
			if err := f(); err != nil {
				return s, err
			}
			s[i] = append(s[i], time.Since(t))
		}
	}
	return s, nil
}

// latencyRow reports a round-trip figure against its baseline: the ratio of
// the medians, met when it is at most limit (limit 0: reference only).
func latencyRow(v, base samples, limit float64, target string) Row {
	ratio := float64(v.median()) / float64(base.median())
	r := Row{
		Value:    fmt.Sprintf("%s (p99 %s)", dur(v.median()), dur(v.p99())),
		Baseline: fmt.Sprintf("%s (p99 %s)", dur(base.median()), dur(base.p99())),
		Ratio:    ratio,
		Spread:   fmt.Sprintf("IQR %.0f%% / %.0f%%", 100*v.spread(), 100*base.spread()),
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

// rates are the rates (bytes or commands per second) of repeated runs of
// one thing.
type rates []float64

func (r rates) median() float64 {
	if len(r) == 0 {
		return 0
	}
	c := slices.Clone(r)
	slices.Sort(c)
	if n := len(c); n%2 == 0 {
		return (c[n/2-1] + c[n/2]) / 2
	}
	return c[len(c)/2]
}

// spread is the whole range, highest minus lowest, relative to the median:
// with a handful of repetitions there are no quartiles to speak of, and
// the range hides nothing.
func (r rates) spread() float64 {
	m := r.median()
	if m == 0 {
		return 0
	}
	return (slices.Max(r) - slices.Min(r)) / m
}

// ratios are the ratios of a's rates to b's, repetition by repetition.
func ratios(a, b rates) rates {
	r := make(rates, min(len(a), len(b)))
	for i := range r {
		r[i] = a[i] / b[i]
	}
	return r
}

// turn does one share of a repetition's work and says how much it did
// (bytes, commands) and how long that took.
type turn func() (work float64, took time.Duration, err error)

// alternateRates measures a and b in turn: after one unmeasured warm-up of
// each, n repetitions of k turns of each, in the order a b, b a, a b, …,
// so that neither always runs first and a load that rises or falls
// through a repetition weighs on both alike. A repetition's rate on each
// side is its turns' work over their time. Each turn starts its processes
// anew, and where the scheduler places them moves a pipe's throughput on a
// shared two-core host by up to four times from one run to the next (P4's
// baseline read 1.1–4.4 GB/s in turns of one run): a repetition averages
// k of those draws on each side, taken next to each other, rather than
// one. It returns the n rates of each side and stops at the first error.
func alternateRates(n, k int, a, b turn) (ra, rb rates, err error) {
	for _, f := range []turn{a, b} {
		if _, _, err := f(); err != nil {
			return nil, nil, err
		}
	}
	for range n {
		var work, took [2]float64
		for j := range 2 * k {
			side := (j + j/2) % 2 // 0 1 1 0 0 1 1 0 …
			f := a
			if side == 1 {
				f = b
			}
			w, d, err := f()
			if err != nil {
				return ra, rb, err
			}
			work[side] += w
			took[side] += d.Seconds()
		}
		ra = append(ra, work[0]/took[0])
		rb = append(rb, work[1]/took[1])
	}
	return ra, rb, nil
}

// rateRow reports a throughput figure against its baseline, both measured
// in turn by alternateRates over k turns a repetition: the ratio is the
// median of the repetitions' ratios, met when it is at least limit. The
// spread column gives the range of each and of the ratio.
func rateRow(v, base rates, k int, show func(float64) string, limit float64, target string) Row {
	rs := ratios(v, base)
	ratio := rs.median()
	return Row{
		Value:    show(v.median()),
		Baseline: show(base.median()),
		Ratio:    ratio,
		Spread:   fmt.Sprintf("range %.0f%% / %.0f%%, ratio %.0f%%", 100*v.spread(), 100*base.spread(), 100*rs.spread()),
		Target:   target,
		Met:      yesNo(ratio >= limit),
		Note: fmt.Sprintf("n=%d, each %d turns of each side in turn; %s–%s against %s–%s, ratio %.3f–%.3f×",
			len(v), k, show(slices.Min(v)), show(slices.Max(v)), show(slices.Min(base)), show(slices.Max(base)), slices.Min(rs), slices.Max(rs)),
	}
}
