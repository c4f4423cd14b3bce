package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/proctree"
)

// leakChecked runs the tests, then looks for leaked goroutines, as
// goleak.VerifyTestMain would; testscript.Main needs to own os.Exit.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	code := l.m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

func TestMain(m *testing.M) {
	testscript.Main(leakChecked{m}, map[string]func(){"conch": main})
}

// TestScripts runs the scripts in testdata/script: the real conch binary
// against a real daemon that each script starts.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, "state"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv(client.EnvURL, "")
			env.Setenv(client.EnvToken, "")
			return os.MkdirAll(filepath.Join(env.WorkDir, "home"), 0o755)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitdaemon": cmdWaitDaemon,
			"alive":      cmdAlive,
			"waitfile":   cmdWaitFile,
			"gone":       cmdGone,
			"healthz":    cmdHealthz,
		},
		Condition: func(cond string) (bool, error) {
			if cond != "cgroup" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return cgroupsWork(), nil
		},
	})
}

// cgroupsWork reports whether the daemon would contain what it starts
// here: a writable cgroup v2 hierarchy exists.
var cgroupsWork = sync.OnceValue(func() bool {
	r := containment.Open(containment.Config{Instance: "probe-" + strconv.Itoa(os.Getpid())})
	defer r.Destroy()
	return r.Mode() == containment.ModeCgroup2
})

// cmdGone asserts that no pid listed in the files runs 1 s after it is
// called, at the latest.
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: gone PIDFILE...")
	}
	deadline := time.Now().Add(time.Second)
	for _, f := range args {
		for _, field := range strings.Fields(ts.ReadFile(f)) {
			pid, err := strconv.Atoi(field)
			ts.Check(err)
			for proctree.Alive(pid) {
				if time.Now().After(deadline) {
					ts.Fatalf("process %d (from %s) runs 1 s later", pid, f)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// cmdHealthz asserts that a field of the daemon's /healthz answer holds
// the value given (a regular expression).
func cmdHealthz(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: healthz FIELD REGEXP")
	}
	ep, err := client.ReadEndpoint(filepath.Join(ts.Getenv("XDG_STATE_HOME"), "conch"))
	ts.Check(err)
	resp, err := http.Get(ep.URL + "/healthz")
	ts.Check(err)
	defer resp.Body.Close()
	var h map[string]any
	ts.Check(json.NewDecoder(resp.Body).Decode(&h))
	got := fmt.Sprint(h[args[0]])
	if regexp.MustCompile(args[1]).MatchString(got) == neg {
		ts.Fatalf("healthz %s = %q", args[0], got)
	}
}

// cmdWaitDaemon waits until the daemon the script started answers.
func cmdWaitDaemon(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: waitdaemon")
	}
	dir := filepath.Join(ts.Getenv("XDG_STATE_HOME"), "conch")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ep, err := client.ReadEndpoint(dir); err == nil {
			c, err := client.New(ep.URL, "")
			ts.Check(err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Health(ctx)
			cancel()
			c.CloseIdleConnections()
			if err == nil {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("the daemon did not come up within 20s")
}

// cmdWaitFile waits until a file exists and is not empty.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && len(b) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s did not appear within 20s", args[0])
}

// cmdAlive asserts that every pid listed in the files is running (or, with
// !, that none is). A zombie counts as gone.
func cmdAlive(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: [!] alive PIDFILE...")
	}
	for _, f := range args {
		for _, field := range strings.Fields(ts.ReadFile(f)) {
			pid, err := strconv.Atoi(field)
			ts.Check(err)
			if proctree.Alive(pid) == neg {
				ts.Fatalf("process %d (from %s): running=%v", pid, f, !neg)
			}
		}
	}
}
