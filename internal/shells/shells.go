// Package shells resolves the POSIX shells conch accepts — bash, sh, dash,
// zsh, ksh, mksh and busybox sh — by name or absolute path.
package shells

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/conchsh/conch/api"
)

// Family is a shell implementation; it decides the dialect and how the shell
// is driven.
type Family string

// The shell families.
const (
	Bash    Family = "bash"
	Dash    Family = "dash"
	Zsh     Family = "zsh"
	Ksh     Family = "ksh"  // AT&T ksh93
	Mksh    Family = "mksh" // MirBSD ksh
	Busybox Family = "busybox"
)

// Shell is a resolved shell.
type Shell struct {
	Name   string   // as asked for: "bash", "busybox", "/bin/sh"
	Path   string   // absolute path of the executable, links not followed
	Family Family   // what the executable really is
	Prefix []string // arguments before the shell's own ("sh" for busybox)
}

// ErrUnknownShell is wrapped by Resolve's error for a name that is not one of
// the accepted shells; use errors.Is.
var ErrUnknownShell = errors.New("not a supported POSIX shell")

// ErrNotInstalled is wrapped by Resolve's error for an accepted shell that is
// not on this machine.
var ErrNotInstalled = errors.New("shell not installed")

var families = map[string]Family{
	"bash": Bash, "sh": "", "dash": Dash, "zsh": Zsh, "ksh": Ksh, "ksh93": Ksh,
	"mksh": Mksh, "busybox": Busybox,
}

// Names lists the shell names Resolve accepts.
var Names = []string{"bash", "sh", "dash", "zsh", "ksh", "mksh", "busybox"}

// Resolve finds the shell called name ("" means bash), or at the absolute
// path name, and works out its family.
func Resolve(name string) (Shell, error) {
	if name == "" {
		name = "bash"
	}
	base := filepath.Base(name)
	if filepath.IsAbs(name) {
		if _, ok := families[base]; !ok {
			return Shell{}, fmt.Errorf("shell %s: %w (want one of %s)", api.Quote(name), ErrUnknownShell, strings.Join(Names, ", "))
		}
	} else if _, ok := families[name]; !ok || strings.ContainsRune(name, '/') {
		return Shell{}, fmt.Errorf("shell %s: %w (want one of %s)", api.Quote(name), ErrUnknownShell, strings.Join(Names, ", "))
	}
	path := name
	if !filepath.IsAbs(name) {
		p, err := exec.LookPath(name)
		if err != nil {
			return Shell{}, fmt.Errorf("shell %s: %w: looked for it in PATH", api.Quote(name), ErrNotInstalled)
		}
		if path, err = filepath.Abs(p); err != nil {
			return Shell{}, fmt.Errorf("shell %s: %w", api.Quote(name), err)
		}
	} else if _, err := exec.LookPath(name); err != nil {
		// Without the name, which the error quotes whole.
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Shell{}, fmt.Errorf("shell %s: %w: %v", api.Quote(name), ErrNotInstalled, err)
	}
	s := Shell{Name: name, Path: path, Family: families[base]}
	if s.Family == "" || base == "ksh" {
		s.Family = identify(path, s.Family)
	}
	if s.Family == Busybox {
		s.Prefix = []string{"sh"}
	}
	return s, nil
}

// identify follows links to tell what sh or ksh really is.
func identify(path string, guess Family) Family {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	switch b := filepath.Base(real); {
	case strings.Contains(b, "bash"):
		return Bash
	case strings.Contains(b, "dash"):
		return Dash
	case strings.Contains(b, "mksh") || strings.Contains(b, "lksh"):
		return Mksh
	case strings.Contains(b, "ksh"):
		return Ksh
	case strings.Contains(b, "zsh"):
		return Zsh
	case strings.Contains(b, "busybox"):
		return Busybox
	}
	if guess == "" {
		return Dash // an unknown sh: drive it as the plainest POSIX shell
	}
	return guess
}

// Argv returns the command line that runs script text with -c. A "--"
// ends the shell's options first, so that a text beginning with "-" is run
// as a command, as a session runs it, rather than read as an option.
func (s Shell) Argv(login bool, script string) []string {
	argv := append([]string{s.Path}, s.Prefix...)
	if login {
		argv = append(argv, "-l")
	}
	return append(argv, "-c", "--", script)
}
