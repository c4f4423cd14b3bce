package exec

import (
	"errors"
	"testing"

	"github.com/conchsh/conch/process"
)

// Start is the one place that checks a process's fields.
func TestStartRefusesShellWithArgv(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{
		{Argv: []string{"true"}, Shell: "bash"},
		{Argv: []string{"true"}, Login: true},
		{Kind: process.KindExec},
	} {
		if _, err := Start(opts); !errors.Is(err, process.ErrInvalidArgument) {
			t.Errorf("Start(%+v) = %v, want ErrInvalidArgument", opts, err)
		}
	}
}

// A PTY with neither Cmd nor Argv runs the shell itself, shown as its argv.
func TestPTYRunsShellItself(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Shell: "dash", Login: true})
	i := p.Info()
	if len(i.Argv) < 2 || i.Argv[len(i.Argv)-1] != "-l" || i.Shell != "" || i.ShellCommand != "" {
		t.Fatalf("Info = argv %q shell %q cmd %q; want the shell's argv ending in -l", i.Argv, i.Shell, i.ShellCommand)
	}
}
