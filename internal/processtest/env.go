package processtest

import (
	"strconv"
	"strings"
)

// BigEnv returns an environment of twelve variables of 120,000 bytes
// each, BIG0 to BIG11: 1.4 MB, under what the kernel passes to a program
// (each variable under its 128 KiB, all under its 2 MB).
func BigEnv() map[string]string {
	env := map[string]string{}
	for j := range 12 {
		env["BIG"+strconv.Itoa(j)] = strings.Repeat(string(rune('a'+j)), 120_000)
	}
	return env
}
