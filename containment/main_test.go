package containment_test

import (
	"testing"

	"github.com/conchsh/conch/internal/reapertest"
)

func TestMain(m *testing.M) { reapertest.Main(m) }
