package process

import (
	"fmt"
	"strings"
)

// CheckEnv refuses environment variables that execve cannot pass, or that
// would reach the process as other variables than the ones asked for: an
// empty name, a name holding '=' ({"PATH=/evil:/bin": ""} sets PATH), and a
// NUL byte anywhere. Its errors wrap ErrInvalidArgument.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case k == "":
			return fmt.Errorf("%w: env: empty variable name", ErrInvalidArgument)
		case strings.ContainsAny(k, "=\x00"):
			return fmt.Errorf("%w: env: variable name %q holds '=' or NUL", ErrInvalidArgument, k)
		case strings.ContainsRune(v, 0):
			return fmt.Errorf("%w: env: the value of %s holds NUL", ErrInvalidArgument, k)
		}
	}
	return nil
}

// CheckArg refuses an argument that holds a NUL byte, which execve cannot
// pass: the program would fail to start rather than be refused. what names
// the argument in the error, which wraps ErrInvalidArgument.
func CheckArg(what, s string) error {
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%w: %s holds NUL", ErrInvalidArgument, what)
	}
	return nil
}
