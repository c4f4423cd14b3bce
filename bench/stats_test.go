package main

import (
	"fmt"
	"math"
	"testing"
)

// TestRateRowRatioAndSpread: a throughput figure is the median of the
// ratios of its runs, each to the baseline runs around it, so that a load
// that came between runs moves both sides of a ratio rather than the
// figure; its spread column gives the range of each side and of the ratio.
func TestRateRowRatioAndSpread(t *testing.T) {
	// The machine got twice as busy during the third run: each side
	// halves, every ratio stays 0.5.
	base := rates{100, 100, 100, 50, 50, 50}
	v := rates{50, 50, 37.5, 25, 25}
	row := rateRow(v, base, func(r float64) string { return fmt.Sprint(r) }, 0.5, "≥ 0.5×")
	if math.Abs(row.Ratio-0.5) > 1e-9 || row.Met != "yes" {
		t.Errorf("ratio %v met %s, want 0.5 met", row.Ratio, row.Met)
	}
	if want := "range 67% / 67%, ratio 0%"; row.Spread != want {
		t.Errorf("spread %q, want %q", row.Spread, want)
	}
	if row.Value != "37.5" || row.Baseline != "75" {
		t.Errorf("value %s baseline %s, want the medians 37.5 and 75", row.Value, row.Baseline)
	}
}

// TestRatiosBetweenTwoBaselines: a figure measured between two runs of its
// baseline is compared with their mean, so that a load that rises steadily
// through the run does not move the ratio.
func TestRatiosBetweenTwoBaselines(t *testing.T) {
	// The baseline loses 10 each time it runs; the figure, run between
	// two of its runs, is half of what the baseline would do then.
	base := rates{100, 90, 80, 70}
	v := rates{47.5, 42.5, 37.5}
	rs := ratios(v, base)
	for i, r := range rs {
		if math.Abs(r-0.5) > 1e-9 {
			t.Errorf("ratio %d is %v, want 0.5", i, r)
		}
	}
	if got := rs.spread(); got > 1e-9 {
		t.Errorf("the ratios spread by %v, want none", got)
	}
}
