package proctree

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// childDefaults are the signals a command must start with at their default
// disposition: an interrupt relies on SIGINT, a hang-up on SIGHUP, and a
// shell pipeline on SIGPIPE (`yes | head -1` is quiet). The Go runtime keeps
// an inherited SIG_IGN only for SIGHUP and SIGINT; the others are listed in
// case it ever keeps more.
var childDefaults = []os.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT}

var resetOnce sync.Once

// dropped is where the signals this process handles only to drop them are
// delivered. Notify never blocks: with the buffer full, deliveries are
// dropped, which is what ignoring them means. No goroutine reads it.
var dropped = make(chan os.Signal, 1)

// resetChildSignals makes children started after it get the default
// disposition of SIGINT, SIGHUP, SIGPIPE and SIGQUIT even when this process
// inherited them ignored (started under nohup, or in the background of a
// non-interactive shell). Go keeps an inherited SIG_IGN of SIGINT and SIGHUP,
// and exec passes it on; a signal Go handles is reset to its default at exec. So each such
// signal is handled here by dropping it, which keeps this process ignoring
// it. Signals this process did not inherit ignored are left alone. Calling it
// again does nothing.
func resetChildSignals() {
	resetOnce.Do(func() {
		for _, sig := range childDefaults {
			if signal.Ignored(sig) {
				signal.Notify(dropped, sig)
			}
		}
	})
}

// SurviveBrokenPipe makes a write to a pipe that has no reader fail with
// EPIPE, whatever descriptor it goes to: by default a Go program that writes
// to a broken pipe on its stdout or stderr is ended by SIGPIPE. A daemon
// must outlive whatever reads its log (a log shipper that restarts, a `|
// head`), or every session it holds goes with it; a client must see the
// failed write to end what it runs. Children still start with SIGPIPE at its
// default disposition: a signal Go handles is reset at exec.
func SurviveBrokenPipe() { signal.Notify(dropped, syscall.SIGPIPE) }
