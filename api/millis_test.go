package api

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMillisUnderOne: a positive duration under a millisecond goes as 1,
// not as 0, which means no timeout: conch run --timeout 999us waited for
// the command's end.
func TestMillisUnderOne(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", time.Microsecond: "1", 999 * time.Microsecond: "1",
		time.Millisecond: "1", 1500 * time.Microsecond: "1", 2 * time.Second: "2000",
	} {
		b, err := json.Marshal(Millis(d))
		if err != nil || string(b) != want {
			t.Errorf("Millis(%v) = %s, %v; want %s", d, b, err, want)
		}
	}
}
