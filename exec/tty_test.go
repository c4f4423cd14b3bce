package exec

import (
	"bytes"
	"context"
	"io"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// ttyHelperEnv makes the test binary run TestNoControllingTerminalHelper for
// real: on a terminal of its own, as a daemon started from an operator's
// shell (or under `script`) runs.
const ttyHelperEnv = "CONCH_EXEC_TTY_HELPER"

// ttyProbe says whether the process can open its controlling terminal, and
// prints its pid, session id and tty_nr from /proc/self/stat (fields 1, 6, 7;
// the command name is "sh" here, without spaces).
const ttyProbe = `if (: </dev/tty) 2>/dev/null; then echo tty=yes; else echo tty=no; fi
read -r pid comm state ppid pgrp sid ttynr rest </proc/self/stat
echo "pid=$pid sid=$sid ttynr=$ttynr"`

// An exec process has no controlling terminal even when the daemon has one:
// it cannot read the operator's terminal (and be stopped by SIGTTIN) nor
// write to it. It leads a session of its own, which is also its group.
func TestNoControllingTerminal(t *testing.T) {
	t.Parallel()
	cmd := osexec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNoControllingTerminalHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ttyHelperEnv+"=1")
	cmd.WaitDelay = 5 * time.Second
	// The helper's own terminal, as pty.Start gives it, but started through
	// proctree.Start: the reaper TestMain runs would otherwise take the
	// helper's exit status before cmd.Wait ("waitid: no child processes").
	tty, pts, err := pty.Open()
	require.NoError(t, err)
	defer tty.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	err = proctree.Start(cmd)
	pts.Close()
	require.NoError(t, err)
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&out, tty) // ends with EIO once the helper and its children are gone
	}()
	err = proctree.Wait(cmd)
	tty.Close()
	<-copied
	require.False(t, err != nil || !strings.Contains(out.String(), "--- PASS: TestNoControllingTerminalHelper"), "helper: %v\n%s", err, out.String())
}

func TestNoControllingTerminalHelper(t *testing.T) {
	if os.Getenv(ttyHelperEnv) == "" {
		t.Skip("run by TestNoControllingTerminal on a terminal")
	}
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	require.NoError(t, err, "the helper has no terminal to hide")
	f.Close()
	for _, argv := range [][]string{nil, {"sh", "-c", ttyProbe}} {
		opts := Options{Cmd: ttyProbe, Shell: "sh"}
		if argv != nil {
			opts = Options{Argv: argv}
		}
		p := start(t, opts)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		r, err := process.Wait(ctx, p)
		cancel()
		require.False(t, err != nil || !sameResult(r, process.ExitedWith(0)), "probe: %v %s", err, show(r))
		got := logText(p.Log(), logstore.Stdout)
		pid := strconv.Itoa(p.Info().PID)
		want := "tty=no\npid=" + pid + " sid=" + pid + " ttynr=0\n"
		assert.Equal(t, want, got, "probe said %q, want %q", got, want)
	}
	// A session leader leads its process group too: a group signal still
	// reaches a background child.
	p := start(t, Options{Cmd: "sleep 60 & echo $!; wait"})
	waitOutput(t, p, "\n")
	child, _ := strconv.Atoi(strings.TrimSpace(logText(p.Log(), logstore.Stdout)))
	ids := proctree.IdentsOf(child)
	require.NoError(t, syscall.Kill(-p.Info().PID, syscall.SIGKILL))
	requireGone(t, ids)
	wait(t, p)
}
