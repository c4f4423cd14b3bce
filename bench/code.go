package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/codecontext"
)

// python is the interpreter P11 forks as its baseline.
type python struct {
	onPath string // what PATH names python3
	binary string // the binary that runs: onPath, or what its shim execs
}

// realPython finds python3 on PATH and the binary it runs. A version
// manager's shim (pyenv, asdf) is a script that picks a version and execs
// it, and costs tens of milliseconds more than the interpreter itself on
// every start, so the baseline asks the interpreter once where it is.
func realPython(ctx context.Context) (python, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return python{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return python{}, fmt.Errorf("ask %s for its executable: %w", p, err)
	}
	bin := strings.TrimSpace(string(out))
	if bin == "" || !filepath.IsAbs(bin) {
		return python{}, fmt.Errorf("%s does not know its executable (%q)", p, bin)
	}
	return python{onPath: p, binary: bin}, nil
}

// describe says which binary the baseline forks, and through what.
func (py python) describe() string {
	if py.binary == py.onPath {
		return "baseline " + py.binary
	}
	return fmt.Sprintf("baseline %s (python3 on PATH is %s, which runs it)", py.binary, py.onPath)
}

// measureP11 is the round trip of a trivial cell (`pass`) in a Python code
// context through the Go API, against forking `python3 -c pass`.
func measureP11(ctx context.Context, cfg config) Row {
	if _, err := exec.LookPath("python3"); err != nil {
		return notMeasured("python3 is not installed")
	}
	py, err := realPython(ctx)
	if err != nil {
		return failed(err)
	}
	python := py.binary
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := codecontext.New(sctx, codecontext.Options{Language: codecontext.Python})
	cancel()
	if err != nil {
		return failed(err)
	}
	defer c.Close()
	cell := func() error {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_, r, err := c.Run(ctx, codecontext.CellOptions{Code: "pass"})
		if err != nil {
			return err
		}
		return exitedZero(r)
	}
	fork := func() error { return exec.Command(python, "-c", "pass").Run() }
	v, base, err := alternate(cfg.slow, cell, fork)
	if err != nil {
		return failed(err)
	}
	row := latencyRow(v, base, 0.10, "≤ 0.10×")
	// The context finds python3 on PATH too; through a shim, its
	// interpreter is the binary the shim execs once at the start.
	ran, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.Info().PID))
	if err != nil {
		ran = "unknown: " + err.Error()
	}
	row.Note += "; " + py.describe() + "; the context's interpreter " + ran
	return row
}
