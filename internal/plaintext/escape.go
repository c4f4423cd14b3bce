package plaintext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with the characters that would act on a terminal, or
// read as something else, shown as escapes: control characters (`\x1b`),
// C1 controls (`\u009b`) and bytes that are not UTF-8 (`\xff`). It is for
// names a process chose (a command line, a directory) shown in a table or
// a line of text, where a newline or an escape sequence must not pass.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
