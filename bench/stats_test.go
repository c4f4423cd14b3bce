package main

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// TestRateRowRatioAndSpread: a throughput figure is the median of the
// ratios of its repetitions, each to the baseline measured in turn with
// it, so that a load that came between repetitions moves both sides of a
// ratio rather than the figure; its spread column gives the range of each
// side and of the ratio.
func TestRateRowRatioAndSpread(t *testing.T) {
	// The machine got twice as busy from the third repetition on: each
	// side halves, every ratio stays 0.5.
	base := rates{100, 100, 50, 50, 50}
	v := rates{50, 50, 25, 25, 25}
	row := rateRow(v, base, 4, func(r float64) string { return fmt.Sprint(r) }, 0.5, "≥ 0.5×")
	if math.Abs(row.Ratio-0.5) > 1e-9 || row.Met != "yes" {
		t.Errorf("ratio %v met %s, want 0.5 met", row.Ratio, row.Met)
	}
	if want := "range 100% / 100%, ratio 0%"; row.Spread != want {
		t.Errorf("spread %q, want %q", row.Spread, want)
	}
	if row.Value != "25" || row.Baseline != "50" {
		t.Errorf("value %s baseline %s, want the medians 25 and 50", row.Value, row.Baseline)
	}
}

// TestAlternateRatesTurns: after a warm-up of each, a repetition runs its
// turns in the order a b b a a b b a, so that neither side always runs
// first, and its rate on each side is the turns' work over their time,
// not the mean of their rates: a turn the scheduler slowed weighs by the
// time it took.
func TestAlternateRatesTurns(t *testing.T) {
	var order string
	// a's turns alternate 10 units in 1 s and 10 units in 4 s (rates 10
	// and 2.5: their mean is 6.25, their sum 20 units in 5 s is 4).
	var aTurns int
	a := func() (float64, time.Duration, error) {
		order += "a"
		aTurns++
		if aTurns%2 == 0 {
			return 10, 4 * time.Second, nil
		}
		return 10, time.Second, nil
	}
	b := func() (float64, time.Duration, error) {
		order += "b"
		return 8, time.Second, nil
	}
	ra, rb, err := alternateRates(2, 4, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := "ab" + "abbaabba" + "abbaabba"; order != want {
		t.Errorf("ran %s, want %s", order, want)
	}
	for i := range 2 {
		if ra[i] != 4 || rb[i] != 8 {
			t.Errorf("repetition %d: rates %v and %v, want 4 and 8", i, ra[i], rb[i])
		}
	}
	if len(ra) != 2 || len(rb) != 2 {
		t.Errorf("%d and %d rates, want 2 each", len(ra), len(rb))
	}
}

// TestAlternateRatesStopsAtError: a turn that fails ends the measurement
// with its error.
func TestAlternateRatesStopsAtError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	a := func() (float64, time.Duration, error) { return 1, time.Second, nil }
	b := func() (float64, time.Duration, error) {
		calls++
		if calls == 3 {
			return 0, 0, boom
		}
		return 1, time.Second, nil
	}
	if _, _, err := alternateRates(3, 2, a, b); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if calls != 3 {
		t.Errorf("b ran %d times, want 3: none after its error", calls)
	}
}
