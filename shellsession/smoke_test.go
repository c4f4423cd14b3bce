package shellsession

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/stretchr/testify/require"
)

func output(c *Command) (stdout, stderr string) {
	var o, e strings.Builder
	for _, f := range c.Log().Page(0, 0).Frames {
		if f.Channel == logstore.Stdout {
			o.Write(f.Data)
		} else {
			e.Write(f.Data)
		}
	}
	return o.String(), e.String()
}

func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	s, err := New(ctx, Options{})
	require.NoError(t, err)
	defer s.Close()
	for _, cmd := range []string{"echo hi", "cd /tmp; x=5", "echo $x $PWD; false", "echo $?", "echo 'x", "exit 3"} {
		c, r, err := s.Run(ctx, CommandOptions{Cmd: cmd})
		require.NoError(t, err)
		o, e := output(c)
		t.Logf("%q -> %+v code=%v out=%q err=%q cwd=%s", cmd, r, *r.ExitCode, o, e, s.Cwd())
	}
	_, err = s.Submit(CommandOptions{Cmd: "true"})
	require.ErrorIs(t, err, ErrSessionEnded)
}
