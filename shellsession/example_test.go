package shellsession_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/conchsh/conch/shellsession"
)

// A session keeps its shell's state from one command to the next; a command
// that fails is a result, not an error.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "conch-example-")
	defer os.RemoveAll(dir)
	os.Mkdir(filepath.Join(dir, "src"), 0o755)

	s, err := shellsession.New(ctx, shellsession.Options{Shell: "bash", Cwd: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close() // ends the shell and every process under it

	s.Run(ctx, shellsession.CommandOptions{Cmd: "cd src && export MODE=test"})
	c, res, err := s.Run(ctx, shellsession.CommandOptions{
		Cmd:              `echo "mode $MODE"; echo oops >&2; exit_code=3; (exit $exit_code)`,
		ExecutionTimeout: time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Reason, *res.ExitCode)
	// The frames hold stdout and stderr in the order they arrived; the two
	// are separate pipes, so only each channel's own order is exact.
	out := map[string]string{}
	for _, f := range c.Log().Page(0, 0).Frames {
		out[f.Channel.String()] += string(f.Data)
	}
	fmt.Printf("stdout: %q\nstderr: %q\n", out["stdout"], out["stderr"])
	fmt.Println(filepath.Base(s.Cwd()))
	// Output:
	// exited 3
	// stdout: "mode test\n"
	// stderr: "oops\n"
	// src
}
