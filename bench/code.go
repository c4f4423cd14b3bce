package main

import (
	"context"
	"os/exec"
	"time"

	"github.com/conchsh/conch/codecontext"
)

// measureP11 is the round trip of a trivial cell (`pass`) in a Python code
// context through the Go API, against forking `python3 -c pass`.
func measureP11(ctx context.Context, cfg config) Row {
	python, err := exec.LookPath("python3")
	if err != nil {
		return notMeasured("python3 is not installed")
	}
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
	return latencyRow(v, base, 0.10, "≤ 0.10×")
}
