package process

import (
	"fmt"
	"strings"
	"syscall"
)

var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
	"TERM": syscall.SIGTERM, "CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP,
	"PIPE": syscall.SIGPIPE, "ALRM": syscall.SIGALRM, "ABRT": syscall.SIGABRT,
	"SEGV": syscall.SIGSEGV, "WINCH": syscall.SIGWINCH, "TSTP": syscall.SIGTSTP,
}

// ParseSignal parses a signal name such as "TERM", "SIGTERM" or "term".
// An unknown name is an error wrapping ErrInvalidArgument.
func ParseSignal(name string) (syscall.Signal, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")
	if s, ok := signalNames[n]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("%w: unknown signal %q", ErrInvalidArgument, name)
}

// SignalName returns the name of sig without "SIG" ("TERM"), or its number.
func SignalName(sig syscall.Signal) string {
	for n, s := range signalNames {
		if s == sig {
			return n
		}
	}
	return fmt.Sprint(int(sig))
}
