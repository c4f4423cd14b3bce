package mcpserver_test

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/mcpserver"
)

// TestRunShellNamesEveryShell checks that the run tool's description of
// shell, which is all an agent reads of it, names every shell a session
// takes: one left out is one an agent does not know it may ask for.
func TestRunShellNamesEveryShell(t *testing.T) {
	t.Parallel()
	f, ok := reflect.TypeFor[mcpserver.RunInput]().FieldByName("Shell")
	require.True(t, ok)
	desc := f.Tag.Get("jsonschema")
	for _, name := range shells.Names {
		require.Regexp(t, regexp.MustCompile(`\b`+name+`\b`), desc, "the shell description leaves out %s", name)
	}
}
