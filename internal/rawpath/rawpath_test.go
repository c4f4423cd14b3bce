package rawpath

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUnder(t *testing.T) {
	assert.Equal(t, "/d/l/../c", Under("/d", "l/../c"))
	assert.Equal(t, "/d/./x/", Under("/d/", "./x/"))
	assert.Equal(t, "/c", Under("/", "c"))
}

func TestSplit(t *testing.T) {
	for p, want := range map[string][2]string{
		"/d/l/../c": {"/d/l/..", "c"},
		"/d/c/.":    {"/d/c", "."},
		"/d/x/":     {"/d/x", ""},
		"/c":        {"/", "c"},
		"/":         {"/", ""},
		"c":         {".", "c"},
		"/d//c":     {"/d/", "c"},
	} {
		dir, name := Split(p)
		assert.Equal(t, want, [2]string{dir, name}, "Split(%q)", p)
	}
}

func TestNamesDir(t *testing.T) {
	for p, want := range map[string]bool{
		"": true, "/": true, "x/": true, "x/.": true, "x/..": true, ".": true, "..": true,
		"x": false, "x/.c": false, "x/..c": false, "/d/l/../c": false,
	} {
		assert.Equal(t, want, NamesDir(p), "NamesDir(%q)", p)
	}
}
