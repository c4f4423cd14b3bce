package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs this test binary as the bench command itself when a test
// asks it to, so that figures measured in a process of their own can be
// tested; else it runs the tests and looks for leaked goroutines (a
// figure starts daemons, sessions and servers of its own).
func TestMain(m *testing.M) {
	if os.Getenv("CONCH_BENCH_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestFreshFigureSeesNothingLeftBehind: a figure measured in a process of
// its own does not see what the run left in this one — here a process
// still running, as a session's shell an earlier figure forgot would be.
func TestFreshFigureSeesNothingLeftBehind(t *testing.T) {
	t.Setenv("CONCH_BENCH_TEST_AS_MAIN", "1")
	left := exec.Command("sleep", "60")
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		left.Process.Kill()
		left.Wait()
	}()
	if !strings.Contains(state(), "1 processes under this one") {
		t.Fatalf("this process does not see its own child: %s", state())
	}
	cfg := config{quick: true, reps: 20}
	row := measure(t.Context(), cfg, figure{name: "P0", run: measureP0, fresh: true})
	if row.Value == "error" || row.Met != "ref" {
		t.Fatalf("P0 in a fresh process: %+v", row)
	}
	if !strings.Contains(row.Note, "0 processes under this one") {
		t.Errorf("the fresh process saw what this one left: %s", row.Note)
	}
}

// TestP3SaysWhatIsUnderIt: P3's note gives the one-shot embedded and
// net/http alone around the fork against the same baseline, so that a run
// says how much of the figure is conch's HTTP path.
func TestP3SaysWhatIsUnderIt(t *testing.T) {
	row := measureP3(t.Context(), config{quick: true, reps: 10})
	if row.Value == "error" {
		t.Fatalf("P3: %+v", row)
	}
	for _, want := range []string{"the one-shot embedded (package exec, no HTTP) ", "net/http alone around the fork (its floor) "} {
		i := strings.Index(row.Note, want)
		if i < 0 {
			t.Fatalf("P3's note does not give %q: %s", want, row.Note)
		}
		var ratio float64
		if _, err := fmt.Sscanf(row.Note[i+len(want):], "%f×", &ratio); err != nil || ratio <= 0 {
			t.Errorf("P3's note gives no ratio after %q: %s", want, row.Note)
		}
	}
}
