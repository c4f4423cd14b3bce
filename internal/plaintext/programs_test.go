package plaintext

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// run runs name with args and returns its standard output.
func run(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "LS_COLORS=", "GREP_COLORS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return out
}

// Real programs' output renders as what a person reads on the screen: for
// the colouring ones, the same as their uncoloured output.
func TestPrograms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"notes.txt", "run.sh"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("one x\ntwo\nthree x\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cmd  []string
		want string // or, when empty, the output of plain
		same []string
	}{
		{name: "python progress bar",
			cmd:  []string{"python3", "-c", `for i in range(101): print(f"\r{i}%", end="", flush=True)`},
			want: "100%"},
		{name: "python bar with padding and final newline",
			cmd: []string{"python3", "-c", `
import sys
for i in range(11):
    sys.stdout.write("\r[" + "#"*i + " "*(10-i) + "] " + str(i*10) + "%  ")
    sys.stdout.flush()
sys.stdout.write("\r\x1b[2Kdone\n")
`},
			want: "done\n"},
		{name: "ls colours",
			cmd:  []string{"ls", "-1", "-F", "--color=always"},
			same: []string{"ls", "-1", "-F", "--color=never"}},
		{name: "grep colours",
			cmd:  []string{"grep", "-n", "--color=always", "x", "notes.txt", "run.sh"},
			same: []string{"grep", "-n", "--color=never", "x", "notes.txt", "run.sh"}},
		{name: "printf cursor moves and backspaces",
			cmd:  []string{"printf", `Downloading... 0%%\b\b50%%\b\b\b100%%\n\033[1mbold\033[0m\tcol\033[3D\033[KX\nabc\033[2D\033[1@-\n`},
			want: "Downloading... 100%\nbold\tX\na-bc\n"},
		{name: "bash printf to column",
			cmd:  []string{"bash", "-c", `printf 'name\033[10Gvalue\n'; printf 'xxxxxxxx\r\033[4C\033[2X\n'`},
			want: "name     value\nxxxx  xx\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := run(t, dir, tc.cmd[0], tc.cmd[1:]...)
			want := tc.want
			if tc.same != nil {
				plain := run(t, dir, tc.same[0], tc.same[1:]...)
				if string(plain) == string(out) {
					t.Fatalf("%q prints no escape sequences: %q", tc.cmd, out)
				}
				want = string(plain)
			}
			if got := String(out); got != want {
				t.Errorf("%q printed %q\n got %q\nwant %q", tc.cmd, out, got, want)
			}
			if strings.ContainsRune(want, '\x1b') {
				t.Fatalf("bad expectation %q", want)
			}
		})
	}
}
