// Package behaviourcases loads testdata/behaviour.json, the behaviour cases
// every layer that keeps the promises runs (the Go API, HTTP, the SDKs), so
// that a promise is written once.
package behaviourcases

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// File is the cases' path relative to the module root.
const File = "testdata/behaviour.json"

// TempDir is the placeholder, in any text of a case, for the test's own
// temporary directory, which is also the session's starting directory and
// holds an empty directory "sub".
const TempDir = "$T"

// Case is one behaviour: setup commands, then cmd, with what it must print,
// exit with and leave as the cwd. Per overrides the expectation for shells
// that truly differ; Why says why.
type Case struct {
	Name    string          `json:"name"`
	Promise string          `json:"promise"` // the promises of docs/behaviour.md it pins
	Why     string          `json:"why,omitempty"`
	Setup   []string        `json:"setup,omitempty"`
	Cmd     string          `json:"cmd"`
	Want                    // the expectation on every shell not in Per
	Per     map[string]Want `json:"per,omitempty"`
}

// Want is an expectation as written: a nil field is not said.
type Want struct {
	Stdout *string `json:"stdout,omitempty"`
	// StdoutHex is stdout as hex, for bytes that are not UTF-8.
	StdoutHex *string `json:"stdoutHex,omitempty"`
	Stderr    *string `json:"stderr,omitempty"` // exact
	Has       *string `json:"has,omitempty"`    // stderr contains it
	Exit      *int    `json:"exit,omitempty"`
	AnyExit   bool    `json:"anyExit,omitempty"` // the exit code is not checked
	Cwd       *string `json:"cwd,omitempty"`
}

// Expect is the resolved expectation of a case on one shell.
type Expect struct {
	Stdout string
	// Exactly one of Stderr (exact) and Has (contained) is set.
	Stderr, Has *string
	Exit        *int   // nil: not checked
	Cwd         string // "": not checked
}

// For resolves c's expectation on shell: the defaults (empty output, exit
// 0, exact empty stderr) under c.Want under c.Per[shell].
func (c Case) For(shell string) (Expect, error) {
	empty, zero := "", 0
	e := Expect{Stderr: &empty, Exit: &zero}
	for _, w := range []Want{c.Want, c.Per[shell]} {
		if err := e.apply(w); err != nil {
			return Expect{}, fmt.Errorf("case %q on %s: %w", c.Name, shell, err)
		}
	}
	return e, nil
}

func (e *Expect) apply(w Want) error {
	if w.Stdout != nil {
		e.Stdout = *w.Stdout
	}
	if w.StdoutHex != nil {
		b, err := hex.DecodeString(*w.StdoutHex)
		if err != nil {
			return fmt.Errorf("stdoutHex: %w", err)
		}
		e.Stdout = string(b)
	}
	if w.Stderr != nil && w.Has != nil {
		return errors.New("both stderr and has")
	}
	if w.Stderr != nil {
		e.Stderr, e.Has = w.Stderr, nil
	}
	if w.Has != nil {
		e.Has, e.Stderr = w.Has, nil
	}
	if w.Exit != nil {
		e.Exit = w.Exit
	}
	if w.AnyExit {
		e.Exit = nil
	}
	if w.Cwd != nil {
		e.Cwd = *w.Cwd
	}
	return nil
}

// Sub replaces [TempDir] in s with dir.
func Sub(s, dir string) string { return strings.ReplaceAll(s, TempDir, dir) }

// Load reads the cases from the module root's testdata.
func Load() ([]Case, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, File))
	if err != nil {
		return nil, fmt.Errorf("behaviour cases: %w", err)
	}
	var cases []Case
	if err := json.Unmarshal(b, &cases); err != nil {
		return nil, fmt.Errorf("behaviour cases: %w", err)
	}
	return cases, nil
}

// moduleRoot walks up from this source file to the directory with go.mod:
// tests run in their package's directory, which differs per package.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("behaviour cases: no source path")
	}
	for dir := filepath.Dir(file); ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("behaviour cases: no go.mod above " + file)
		}
		dir = parent
	}
}
