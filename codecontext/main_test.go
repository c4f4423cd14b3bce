package codecontext

import (
	"testing"

	"github.com/conchsh/conch/internal/reapertest"
)

// TestMain runs the tests as the daemon runs: orphans of the contexts under
// test are reparented to this process and reaped here.
func TestMain(m *testing.M) { reapertest.Main(m) }
