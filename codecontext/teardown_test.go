package codecontext

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A context that ended by itself — its interpreter exited, under a cell
// or between cells — lets go of its directory (the driver and its files,
// in the daemon's stream directory in memory) at once: it held it until
// its record was deleted, and for good once the record was forgotten.
func TestEndedByItselfLetsGoOfItsDirectory(t *testing.T) {
	t.Parallel()
	for lang, exit := range map[Language]string{
		Python:     "import os; os._exit(0)",
		JavaScript: "process.exit(0)",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang})
			_, err := os.Stat(c.dir.Path())
			require.NoError(t, err, "the context's directory")
			_, _, _ = run(t, c, exit)
			wait(t, c)
			require.Eventually(t, func() bool {
				_, err := os.Stat(c.dir.Path())
				return os.IsNotExist(err)
			}, 30*time.Second, 10*time.Millisecond, "%s is still there", c.dir.Path())
		})
	}
}
