package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/processtest"
)

// TestRealPythonLooksThroughShims: with a shim first on PATH (a script
// that execs the python3 found after it, as pyenv's and asdf's do), the
// baseline of P11 is the binary the shim runs, not the shim.
func TestRealPythonLooksThroughShims(t *testing.T) {
	found, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	processtest.WriteExecutable(t, shim, "#!/bin/sh\nexec '"+found+"' \"$@\"\n")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	py, err := realPython(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if py.onPath != shim {
		t.Errorf("python3 on PATH is %s, want the shim %s", py.onPath, shim)
	}
	if strings.HasPrefix(py.binary, dir) {
		t.Fatalf("the baseline is the shim %s", py.binary)
	}
	// What the shim ran is a binary, not another script.
	b, err := os.ReadFile(py.binary)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(b, []byte("#!")) {
		t.Errorf("the baseline %s is a script", py.binary)
	}
	if out, err := exec.Command(py.binary, "-c", "print(6*7)").Output(); err != nil || string(out) != "42\n" {
		t.Errorf("%s -c 'print(6*7)': %q, %v", py.binary, out, err)
	}
}
