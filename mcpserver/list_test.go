package mcpserver_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// list gives the sessions, and the commands running, oldest first, the
// same at every call. The sessions came in the order of a Go map, which
// differs from one call to the next.
func TestListOldestFirst(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	sessions := []string{"zeta", "alpha", "mid", "beta", "omega", "delta"}
	var commands []string
	for _, s := range sessions {
		r, _ := c.run(map[string]any{"command": "sleep 60", "session": s, "timeout": 0.05})
		require.True(t, r.Running, "sleep 60 in %s answered %+v", s, r)
		commands = append(commands, r.ID)
	}
	for range 10 {
		l := c.list()
		var names, ids []string
		for _, s := range l.Sessions {
			names = append(names, s.Name)
		}
		for _, p := range l.Processes {
			ids = append(ids, p.ID)
		}
		require.Equal(t, sessions, names)
		require.Equal(t, commands, ids)
	}
}
