package mcpserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/mcpserver"
)

// printfCommand is a shell command that prints b exactly: every byte as
// an octal escape, so that no byte means anything to the shell.
func printfCommand(b string) string {
	var c strings.Builder
	c.WriteString("printf '")
	for i := 0; i < len(b); i++ {
		fmt.Fprintf(&c, `\%03o`, b[i])
	}
	c.WriteString("'")
	return c.String()
}

// words is "w1 w2 ... wN " and a newline: a line longer than lineSlack,
// so that pages are cut inside it, and every cut of a word or the blank
// after it is made by some limit.
func words(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String() + "\n"
}

// pageJoinTexts are outputs whose pages must join back to the whole text:
// blanks inside and at the end of lines, tabs, CRLF, colours the text
// drops between words and before a line end, multibyte characters, bytes
// that are not UTF-8 (one U+FFFD each, 3 bytes of text for 1 of output).
var pageJoinTexts = []string{
	words(300),
	"line1\nline2 € end\n",
	"a\xffb\n",
	"tab\there  two  spaces \t x\r\nnext\r\n" + strings.Repeat("é€😀 ", 60) + "\n",
	strings.Repeat("red \x1b[31mword\x1b[0m \x1b[1m \x1b[0mand  ", 25) + "\x1b[32m  \x1b[0m\n" +
		strings.Repeat("x", 300) + "   \nend  \n",
	strings.Repeat("a \xff\xfe  \xe2\x82 b   ", 30) + "  \r\n   \n  tail",
}

// TestReadPagesJoinToWhole pages through outputs with read_output at many
// limits: the pages, joined, are the text read whole. A page cut inside a
// line once lost the blank before its cut ("w26w27", "line2 €end"), and a
// limit of 1 lost a byte that is not UTF-8, whose U+FFFD is 3 bytes.
func TestReadPagesJoinToWhole(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	limits := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 23, 31, 47, 64, 95, 97, 100, 101, 128, 199, 257, 300, 511, 1000}
	for i, text := range pageJoinTexts {
		r, _ := c.run(map[string]any{"command": printfCommand(text), "session": "pages", "outputLimit": 1 << 20})
		require.False(t, r.Running)
		var whole mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "limit": 1 << 20}, &whole)
		require.Equal(t, r.Output, whole.Output)
		for _, limit := range limits {
			if limit > 2*len(text) {
				break
			}
			var got strings.Builder
			cursor := ""
			for reads := 0; ; reads++ {
				require.Less(t, reads, 2*len(text)+10, "text %d, limit %d: read_output goes on", i, limit)
				var page mcpserver.ReadOutput
				c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": limit}, &page)
				require.Positive(t, page.Bytes, "text %d, limit %d: a page reads on", i, limit)
				got.WriteString(page.Output)
				if !page.More {
					break
				}
				cursor = page.Next
			}
			require.Equal(t, whole.Output, got.String(), "text %d, limit %d: the pages join to the whole text", i, limit)
		}
	}
}

// TestCutHeadJoinsToWhatFollows cuts a run's answer inside a line, right
// after a blank among others: the head and what read_output reads from its
// omittedAfter join to the whole text. The head once dropped its last
// blank, which omittedAfter pointed past ("w15w16").
func TestCutHeadJoinsToWhatFollows(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	text := words(300)
	for limit := 190; limit <= 215; limit++ {
		r, _ := c.run(map[string]any{"command": printfCommand(text), "session": "heads", "outputLimit": limit})
		require.NotEmpty(t, r.OmittedAfter, "outputLimit %d: the answer is cut", limit)
		head, _, ok := strings.Cut(r.Output, "\n[... ")
		require.True(t, ok, "%q", r.Output)
		var rest mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": r.OmittedAfter, "limit": 1 << 20}, &rest)
		require.Equal(t, strings.TrimSuffix(text, " \n")+"\n", head+rest.Output, "outputLimit %d: the head and what follows it join to the whole text", limit)
	}
}

// TestReadInvalidByteAtTinyLimit reads a byte that is not UTF-8 with a
// limit shorter than its text, U+FFFD's 3 bytes: it comes whole, over the
// limit, as any character longer than the limit does. A limit of 1 or 2
// once read the byte and answered no text for it.
func TestReadInvalidByteAtTinyLimit(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	r, _ := c.run(map[string]any{"command": `printf 'a\377b\n'`})
	require.Equal(t, "a\uFFFDb\n", r.Output)
	for _, limit := range []int{1, 2} {
		var page mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": "0+1", "limit": limit}, &page)
		require.Equal(t, "\uFFFD", page.Output, "limit %d", limit)
		require.EqualValues(t, 1, page.Bytes, "limit %d", limit)
		require.Equal(t, "0+2", page.Next, "limit %d", limit)
	}
}
