package api

import (
	"encoding/json"
	"strings"
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

// TestMillisTinyIsSome: a positive number of milliseconds too small for a
// nanosecond is still a timeout, the shortest, not 0, which means none: a
// run with "timeout": 1e-9 waited for the process's end, and one with
// 1e-400, too small for a float64, did still.
func TestMillisTinyIsSome(t *testing.T) {
	for _, in := range []string{"1e-9", "0.0000001", "1e-400", "0.1e-999", "1E-400"} {
		var m Millis
		if err := json.Unmarshal([]byte(in), &m); err != nil || m.Duration() <= 0 {
			t.Errorf("%s decodes as %v, %v; want a positive duration", in, m.Duration(), err)
		}
	}
	for _, in := range []string{"0", "-0", "0.0", "0e5", "-0.0e-400"} {
		m := Millis(time.Second)
		if err := json.Unmarshal([]byte(in), &m); err != nil || m != 0 {
			t.Errorf("%s decodes as %v, %v; want none", in, m.Duration(), err)
		}
	}
}

// TestMillisRefusal: a value that is no duration is refused saying what a
// duration is and what the value is, in JSON's terms, for the daemon to
// put after the field's name; null is none.
func TestMillisRefusal(t *testing.T) {
	for in, want := range map[string]string{
		`"5s"`:          "want a number of milliseconds, got a string",
		`true`:          "want a number of milliseconds, got a boolean",
		`[1]`:           "want a number of milliseconds, got an array",
		`{}`:            "want a number of milliseconds, got an object",
		`-1`:            "want a number of milliseconds from 0 to 9223372036854, got -1",
		`1e300`:         "want a number of milliseconds from 0 to 9223372036854, got 1e300",
		`1e400`:         "want a number of milliseconds from 0 to 9223372036854, got 1e400",
		`-1e400`:        "want a number of milliseconds from 0 to 9223372036854, got -1e400",
		`-1e-400`:       "want a number of milliseconds from 0 to 9223372036854, got -1e-400",
		`9223372036855`: "want a number of milliseconds from 0 to 9223372036854, got 9223372036855",
		`1` + strings.Repeat("0", 60): "want a number of milliseconds from 0 to 9223372036854, got 1" +
			strings.Repeat("0", 39) + "...",
	} {
		var m Millis
		err := json.Unmarshal([]byte(in), &m)
		if err == nil || err.Error() != want {
			t.Errorf("Millis from %s: %v; want %q", in, err, want)
		}
	}
	m := Millis(time.Second)
	if err := json.Unmarshal([]byte(`null`), &m); err != nil || m != 0 {
		t.Errorf("Millis from null: %v, %v; want 0", m, err)
	}
	if err := json.Unmarshal([]byte(`9223372036854`), &m); err != nil || m.Duration() < 292*365*24*time.Hour {
		t.Errorf("Millis from its most: %v, %v", m.Duration(), err)
	}
}
