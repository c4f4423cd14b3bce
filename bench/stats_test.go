package main

import (
	"fmt"
	"math"
	"testing"
)

// TestRateRowPairsAndSpread: a throughput figure is the median of the
// ratios of pairs measured back to back, so that a load that came and went
// between pairs moves both sides of a pair rather than the figure, and its
// spread column gives the range of each side and of the ratio.
func TestRateRowPairsAndSpread(t *testing.T) {
	// The machine got twice as busy after the first two pairs: each side
	// halves, the ratio of each pair stays 0.5.
	v := rates{50, 50, 25, 25, 25}
	base := rates{100, 100, 50, 50, 50}
	row := rateRow(v, base, func(r float64) string { return fmt.Sprint(r) }, 0.5, "≥ 0.5×")
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
