package localsandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv switches the test binary into one of the helper programs of
// helpers_test.go, so that tests can run real second processes.
const childEnv = "LOCALSANDBOX_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	goleak.VerifyTestMain(m)
}
