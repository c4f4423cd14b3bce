package process

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ParseSignal parses a signal name such as "TERM", "SIGTERM" or "term":
// any of the system's named signals (SYS, BUS, TRAP, ...). An unknown name
// is an error wrapping ErrInvalidArgument.
func ParseSignal(name string) (syscall.Signal, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")
	if n != "" {
		if s := unix.SignalNum("SIG" + n); s != 0 {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown signal %q", ErrInvalidArgument, name)
}

// SignalName returns the name of sig without "SIG" ("TERM"), or its number
// for a signal without one (a real-time signal).
func SignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(sig))
}
