package shellsession

import (
	"os"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Orphans of the sessions under test are reparented to this process and
	// reaped here, as they are in the daemon.
	if err := proctree.EnableSubreaper(); err != nil {
		panic(err)
	}
	stop, err := proctree.StartReaper()
	if err != nil {
		panic(err)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
