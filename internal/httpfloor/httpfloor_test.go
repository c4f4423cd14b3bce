package httpfloor

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestRoundTripRunsTheWork(t *testing.T) {
	defer goleak.VerifyNone(t)
	runs := 0
	var fail error
	f, err := Serve(func() error { runs++; return fail })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		if err := f.RoundTrip(); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 3 {
		t.Fatalf("the work ran %d times for 3 round trips", runs)
	}
	fail = errors.New("the work failed")
	if err := f.RoundTrip(); err == nil || !errors.Is(err, fail) {
		t.Fatalf("a failed work: %v", err)
	}
}
