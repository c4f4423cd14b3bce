package server_test

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
	"github.com/conchsh/conch/server"
)

// joinFrames returns the bytes of the frames on the channels keep accepts.
func joinFrames(t *testing.T, frames []client.LogFrame, keep func(string) bool) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		if keep(f.Channel) {
			data, err := f.Bytes()
			require.NoError(t, err)
			b.Write(data)
		}
	}
	return b.String()
}

// requireConsistent checks that the text fields of r hold the bytes of its
// frames, and that next is its last frame's cursor.
func requireConsistent(t *testing.T, r *client.RunResult) {
	t.Helper()
	require.Equal(t, joinFrames(t, r.Logs, func(string) bool { return true }), r.Output)
	require.Equal(t, joinFrames(t, r.Logs, func(c string) bool { return c != "stderr" }), r.Stdout)
	require.Equal(t, joinFrames(t, r.Logs, func(c string) bool { return c == "stderr" }), r.Stderr)
	require.NotEmpty(t, r.Logs)
	require.Equal(t, r.Logs[len(r.Logs)-1].Cursor, r.Next)
}

// wholeOutput joins r with logs pages as docs/api.md says, through the
// client, and returns the bytes on the channels keep accepts.
func (d *daemon) wholeOutput(t *testing.T, r *client.RunResult, keep func(string) bool) string {
	t.Helper()
	var b strings.Builder
	dropped, err := d.c.WholeOutput(ctx(t), "", r, func(f client.LogFrame) error {
		if keep(f.Channel) {
			data, err := f.Bytes()
			b.Write(data)
			return err
		}
		return nil
	})
	require.NoError(t, err)
	require.False(t, dropped)
	return b.String()
}

// TestRunOutputLimit checks that a run's answer keeps the head and tail of a
// long output within outputLimit, says exactly what it left out, and that
// the join of the answer with the logs pages gives every byte once.
func TestRunOutputLimit(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	var full strings.Builder
	for i := 1; i <= 300_000; i++ {
		full.WriteString(strconv.Itoa(i) + "\n")
	}
	const limit = 256 << 10
	r, p, err := d.c.Run(ctx(t), client.RunOptions{
		StartOptions: client.StartOptions{Cmd: "seq 300000"},
		OutputLimit:  limit,
	})
	require.NoError(t, err)
	require.Nil(t, p)
	requireConsistent(t, r)
	require.False(t, r.Truncated)
	require.LessOrEqual(t, len(r.Output), limit)
	require.Greater(t, len(r.Output), limit-600, "the cuts move at most 256 bytes each, to a line end")
	require.Equal(t, int64(full.Len()-len(r.Output)), r.OmittedBytes)

	head := joinFrames(t, r.Logs[:r.HeadFrames], func(string) bool { return true })
	tail := joinFrames(t, r.Logs[r.HeadFrames:], func(string) bool { return true })
	require.LessOrEqual(t, len(head), limit/2)
	require.True(t, strings.HasPrefix(full.String(), head) && strings.HasSuffix(head, "\n"), "the head ends a line")
	require.True(t, strings.HasSuffix(full.String(), tail))
	require.Equal(t, byte('\n'), full.String()[full.Len()-len(tail)-1], "the tail starts a line")
	require.Equal(t, full.String(), d.wholeOutput(t, r, func(string) bool { return true }))
}

// TestRunOutputBound checks, over HTTP as a client reads it, that an
// answer's text is within outputLimit for several limits: output at most
// the limit, stdout and stderr together too, cut between characters of
// multi-byte UTF-8; that omittedBytes is exact; and that the answer joined
// with logs pages gives each channel's bytes whole.
func TestRunOutputBound(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	const lines = 20_000
	var out, errs strings.Builder
	for i := 1; i <= lines; i++ {
		out.WriteString("ünï€ " + strconv.Itoa(i) + "\n")
		if i%3 == 0 {
			errs.WriteString("err 😀 " + strconv.Itoa(i) + "\n")
		}
	}
	cmd := `awk 'BEGIN{for(i=1;i<=` + strconv.Itoa(lines) + `;i++){print "ünï€ " i; if(i%3==0) print "err 😀 " i > "/dev/stderr"}}'`
	for _, limit := range []int{1, 3, 200, 1000, 4096, 65536, 300_000} {
		code, body := d.raw(t, "POST", "/v1/processes/run",
			`{"cmd":`+strconv.Quote(cmd)+`,"outputLimit":`+strconv.Itoa(limit)+`}`, authed())
		require.Equal(t, 200, code, body)
		var r client.RunResult
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		requireConsistent(t, &r)
		require.LessOrEqual(t, len(r.Output), limit, "limit %d", limit)
		require.LessOrEqual(t, len(r.Stdout)+len(r.Stderr), limit, "limit %d", limit)
		require.Equal(t, len(r.Output), len(r.Stdout)+len(r.Stderr), "limit %d", limit)
		require.True(t, utf8.ValidString(r.Output) && !strings.ContainsRune(r.Output, utf8.RuneError), "limit %d: cut inside a character", limit)
		require.Equal(t, int64(out.Len()+errs.Len()-len(r.Output)), r.OmittedBytes, "limit %d", limit)
		require.Equal(t, out.String(), d.wholeOutput(t, &r, func(c string) bool { return c == "stdout" }), "limit %d", limit)
		require.Equal(t, errs.String(), d.wholeOutput(t, &r, func(c string) bool { return c == "stderr" }), "limit %d", limit)
		t.Logf("limit %d: answer %d bytes, output %d, omitted %d", limit, len(body), len(r.Output), r.OmittedBytes)
	}

	// Plain text can be longer than its bytes (a cursor move becomes
	// blanks): it is held to the limit too.
	for _, limit := range []int{100, 1000, 5000} {
		r, _, err := d.c.Run(ctx(t), client.RunOptions{
			StartOptions: client.StartOptions{Cmd: `for i in $(seq 300); do printf '\033[150Cx\n'; printf '\033[150Cy\n' >&2; done`},
			OutputLimit:  int64(limit), Plain: true,
		})
		require.NoError(t, err)
		require.LessOrEqual(t, len(r.Output), limit, "plain, limit %d", limit)
		require.LessOrEqual(t, len(r.Stdout)+len(r.Stderr), limit, "plain, limit %d", limit)
		requirePlainWhole(t, r, limit)
	}
	// Lines whose text is longer than their bytes: the head and tail are
	// fewer bytes, and their text whole, rather than cut after rendering
	// (L001 and 1,499 blanks, L002–L033 lost though before omittedAfter).
	for _, limit := range []int{1500, 3000} {
		r, _, err := d.c.Run(ctx(t), client.RunOptions{
			StartOptions: client.StartOptions{Cmd: `for i in $(seq 100 299); do printf 'L%s\033[40C|\n' $i; done`},
			OutputLimit:  int64(limit), Plain: true,
		})
		require.NoError(t, err)
		require.LessOrEqual(t, len(r.Output), limit, "limit %d", limit)
		require.True(t, strings.HasPrefix(r.Output, "L100") && strings.HasSuffix(r.Output, "L299"+strings.Repeat(" ", 40)+"|\n"), "limit %d: %q", limit, r.Output)
		requirePlainWhole(t, r, limit)
	}

	// The case of a short limit on many short lines: 200 bytes of text.
	r, _, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{Cmd: "seq 1 20000"}, OutputLimit: 200})
	require.NoError(t, err)
	require.LessOrEqual(t, len(r.Output), 200)
	require.True(t, strings.HasPrefix(r.Output, "1\n2\n") && strings.HasSuffix(r.Output, "\n19999\n20000\n"), "%q", r.Output)
}

// TestRunJoinsLongOutput checks the join of a default-bounded answer with
// the logs pages over 400,000 lines: every byte once, in order.
func TestRunJoinsLongOutput(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	var full strings.Builder
	for i := 1; i <= 400_000; i++ {
		full.WriteString(strconv.Itoa(i) + "\n")
	}
	r := d.run(t, client.StartOptions{Cmd: "seq 1 400000"})
	require.Positive(t, r.OmittedBytes)
	require.LessOrEqual(t, len(r.Output), server.DefaultOutputLimit)
	got := d.wholeOutput(t, r, func(string) bool { return true })
	require.Equal(t, full.Len(), len(got))
	require.True(t, full.String() == got, "the joined output differs from seq's")
}

// TestRunOutputDefaultLimit checks that an answer holds at most about 1 MiB
// of output by default, and that a short output is whole, with no omission.
func TestRunOutputDefaultLimit(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)

	r, p, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "head -c 3000000 /dev/zero; echo done >&2"},
	})
	require.NoError(t, err)
	require.Nil(t, p)
	requireConsistent(t, r)
	require.LessOrEqual(t, len(r.Output), server.DefaultOutputLimit)
	require.Equal(t, int64(3000000+len("done\n")-len(r.Output)), r.OmittedBytes)
	require.Equal(t, "done\n", r.Stderr, "the tail holds the end of the output")
	require.Equal(t, strings.Repeat("\x00", len(r.Stdout)), r.Stdout)

	r, _, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "echo out; echo err >&2"},
		OutputLimit:    4,
	})
	require.NoError(t, err)
	requireConsistent(t, r)
	require.Equal(t, "ou", r.Stdout, "the head is half the limit, cut inside a frame")
	require.Equal(t, "r\n", r.Stderr, "the tail is the rest")
	require.Equal(t, int64(4), r.OmittedBytes)
	require.Equal(t, "0", r.OmittedAfter, "the head holds no whole frame")
}

// TestRunOutputLimitArgument checks outputLimit's range: negative is
// refused; more than the retention is the retention.
func TestRunOutputLimitArgument(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 64 << 10})
	code, body := d.raw(t, "POST", "/v1/processes/run", `{"cmd":"true","outputLimit":-1}`, authed())
	require.Equal(t, 400, code, body)
	require.Contains(t, body, "outputLimit")

	r, _, err := d.c.Run(ctx(t), client.RunOptions{
		StartOptions: client.StartOptions{Cmd: "seq 100000"},
		OutputLimit:  1 << 30,
	})
	require.NoError(t, err)
	requireConsistent(t, r)
	require.True(t, r.Truncated)
	require.Zero(t, r.OmittedBytes)
}

// TestLogsPageBytes checks that a logs page without a limit holds at most
// 1 MiB of frames, and that pages from next give the whole output.
func TestLogsPageBytes(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	const size = 3_000_000
	r := d.run(t, client.StartOptions{Cmd: "head -c " + strconv.Itoa(size) + " /dev/zero | tr '\\0' x"})
	got, cursor, pages := 0, "", 0
	for {
		page, err := d.c.Logs(ctx(t), r.ProcessID, client.LogsOptions{Cursor: cursor})
		require.NoError(t, err)
		if len(page.Items) == 0 {
			break
		}
		bytes := len(joinFrames(t, page.Items, func(string) bool { return true }))
		require.LessOrEqual(t, bytes, 1<<20)
		got += bytes
		cursor = page.Next
		pages++
	}
	require.Equal(t, size, got)
	require.GreaterOrEqual(t, pages, 3)
}

// A logs page says the cursor of the oldest frame retained, and says none
// for a log that retains none (docs/api.md).
func TestLogsPageFirstAvailable(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	page := func(id string) map[string]any {
		code, body := d.raw(t, "GET", "/v1/processes/"+id+"/logs", "", authed())
		require.Equal(t, http.StatusOK, code, body)
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		return p
	}
	quiet := d.run(t, client.StartOptions{Cmd: "true"})
	require.NotContains(t, page(quiet.ProcessID), "firstAvailableCursor")
	said := d.run(t, client.StartOptions{Cmd: "echo a; echo b >&2"})
	p := page(said.ProcessID)
	items := p["items"].([]any)
	require.NotEmpty(t, items)
	require.Equal(t, items[0].(map[string]any)["cursor"], p["firstAvailableCursor"])
}

// TestTinyWritesUnderRetention is issue 11's case: under a retention of
// 1 MiB, 50,000 echo lines (about 540 KB) come back whole, not truncated.
func TestTinyWritesUnderRetention(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 1 << 20})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	r, _, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "for i in $(seq 50000); do echo line $i; done"},
	})
	require.NoError(t, err)
	var want strings.Builder
	for i := 1; i <= 50_000; i++ {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	require.False(t, r.Truncated)
	require.Zero(t, r.OmittedBytes)
	require.Equal(t, want.String(), r.Stdout)
}

// requirePlainWhole requires that the plain output of r is the text of its
// head frames and its tail frames, whole: nothing of them cut after
// rendering, so that what the text leaves out is what r omitted.
func requirePlainWhole(t *testing.T, r *client.RunResult, limit int) {
	t.Helper()
	var head, tail []byte
	for i, f := range r.Logs {
		b := []byte(f.Data)
		if f.Encoding == "base64" {
			var err error
			b, err = base64.StdEncoding.DecodeString(f.Data)
			require.NoError(t, err)
		}
		if r.OmittedBytes > 0 && i >= r.HeadFrames {
			tail = append(tail, b...)
		} else {
			head = append(head, b...)
		}
	}
	require.Equal(t, plaintext.String(head)+plaintext.String(tail), r.Output, "limit %d: the text of the answer's frames", limit)
}

// The output field never makes a character of two channels' bytes: the
// start of one stderr left unfinished is cut where stdout's frame comes,
// as each channel's field shows it. It once showed 😀, from F0 9F 98 on
// stderr and 80 on stdout, which neither wrote.
func TestOutputCharacterOfOneChannel(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	r, p, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{
		Cmd: `printf '\360\237\230' >&2; sleep 0.2; printf '\200'`}})
	require.NoError(t, err)
	require.Nil(t, p)
	require.Equal(t, "\ufffd", r.Stderr)
	require.Equal(t, "\ufffd", r.Stdout)
	require.Equal(t, "\ufffd\ufffd", r.Output)
}

// TestAnswerFieldsAsEncodingJSON: the members an answer writes without
// encoding/json (numbers, booleans, plain strings, a usage) read byte for
// byte as encoding/json writes them.
func TestAnswerFieldsAsEncodingJSON(t *testing.T) {
	for _, v := range []any{
		0, -1, 1 << 40, int64(-1 << 62), true, false, "plain", "needs \"escapes\" <&>\n", "ünïcode",
		&api.Usage{}, &api.Usage{CPUMs: 12}, &api.Usage{CPUMs: -3, MemoryPeakBytes: 1 << 33},
		&api.Usage{CPUMs: math.MaxInt64, MemoryPeakBytes: math.MinInt64}, (*api.Usage)(nil),
	} {
		got, err := server.EncodeField("f", v)
		require.NoError(t, err)
		want, err := json.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, `"f":`+string(want), got, "%#v", v)
	}
	// The encoder writes a usage member by member: a field added to it
	// would be left out of every answer.
	require.Equal(t, 2, reflect.TypeFor[api.Usage]().NumField(), "api.Usage's fields: write the new one in the encoder's field too")
}
