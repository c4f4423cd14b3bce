package shellsession

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/require"
)

// BenchmarkFrameParts is where a bash frame's time goes after a fork, as P1
// runs it: bare interactive bashes, one for each shape of a frame for
// `true` built up part by part towards the one the engine sends — the
// command alone with its end marker written to the shell's stdout, the end
// line's printf with the marker's fields, its fallbacks, the command file
// sourced, the three redirections (stdin from /dev/null, stdout and stderr
// to files) — each measured after a fork of `bash -c true`, the shapes in
// turn in every round so that a drifting load weighs on all alike. It
// reports each shape's median round trip. The engine's own work is not in
// it: see BenchmarkRoundTrip for the whole.
//
//	go test -run '^$' -bench FrameParts -benchtime 400x ./shellsession
func BenchmarkFrameParts(b *testing.B) {
	dir := b.TempDir()
	script := filepath.Join(dir, "cmd")
	require.NoError(b, os.WriteFile(script, []byte("true\n"), 0o600))
	const (
		mark     = `\builtin printf '\036CONCH%s %s %s\000' "$__conch_s" "$-" "${PWD-}"`
		fallback = ` || \command printf '\036CONCH%s %s %s\000' "$__conch_s" "$-" "${PWD-}"` +
			` || \builtin printf '\036F%s\000' "$__conch_s" >&2 || \command printf '\036F%s\000' "$__conch_s" >&2`
	)
	end := "__conch_s=_$?_; " + mark + "\n"
	redirs := " <'/dev/null' >" + filepath.Join(dir, "o1") + " 2>" + filepath.Join(dir, "o2")
	shapes := []struct{ name, text string }{
		{"minimal", "true; printf 'M\\000'\n"},
		{"end-line", "true\n" + end},
		{"end-line+fallbacks", "true\n" + "__conch_s=_$?_; " + mark + fallback + "\n"},
		{"sourced", `\builtin . ` + script + "\n" + end},
		{"redirected", "true" + redirs + "\n" + end},
		{"all", `\builtin . ` + script + redirs + "\n" + "__conch_s=_$?_; " + mark + fallback + "\n"},
	}
	type bare struct {
		in  io.WriteCloser
		out *bufio.Reader
	}
	shells := make([]bare, len(shapes))
	for i := range shapes {
		cmd := exec.Command("bash", "--norc", "--noprofile", "--noediting", "-i")
		in, err := cmd.StdinPipe()
		require.NoError(b, err)
		out, err := cmd.StdoutPipe()
		require.NoError(b, err)
		require.NoError(b, proctree.Start(cmd))
		b.Cleanup(func() { in.Close(); proctree.Wait(cmd) })
		shells[i] = bare{in, bufio.NewReader(out)}
		_, err = io.WriteString(in, "PS1= PS2= PS3=; printf 'ready\\000'\n")
		require.NoError(b, err)
		_, err = shells[i].out.ReadString(0)
		require.NoError(b, err)
	}
	took := make([][]time.Duration, len(shapes))
	for b.Loop() {
		for i, sh := range shells {
			fork := exec.Command("bash", "-c", "true")
			if err := proctree.Start(fork); err != nil {
				b.Fatal(err)
			}
			if err := proctree.Wait(fork); err != nil {
				b.Fatal(err)
			}
			t := time.Now()
			if _, err := io.WriteString(sh.in, shapes[i].text); err != nil {
				b.Fatal(err)
			}
			if _, err := sh.out.ReadString(0); err != nil {
				b.Fatal(err)
			}
			took[i] = append(took[i], time.Since(t))
		}
	}
	for i, s := range shapes {
		b.ReportMetric(float64(median(took[i]).Microseconds()), s.name+"-µs")
	}
}
