package mcpserver_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoEnginePackage checks that the MCP server, which drives conch over
// HTTP in both of its modes, carries none of the engine's packages: its
// types and enums come from api, through the client, as the Go client's do.
func TestNoEnginePackage(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	allowed := map[string]bool{
		"github.com/conchsh/conch/api":                true,
		"github.com/conchsh/conch/client":             true,
		"github.com/conchsh/conch/internal/condwait":  true, // the standard library alone
		"github.com/conchsh/conch/internal/daemonrec": true, // whether the daemon recorded runs, through procfs
		"github.com/conchsh/conch/internal/plaintext": true,
		"github.com/conchsh/conch/internal/procfs":    true, // reads of /proc, through x/sys
		"github.com/conchsh/conch/internal/rawcall":   true, // system calls, through x/sys
		"github.com/conchsh/conch/internal/rawnet":    true, // the client's connections, through rawcall
		"github.com/conchsh/conch/internal/statefile": true, // the client's endpoint record, the standard library alone
		"github.com/conchsh/conch/mcpserver":          true,
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/conchsh/conch/") {
			require.True(t, allowed[pkg], "mcpserver depends on %s", pkg)
		}
	}
}
