package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/conchsh/conch/client"
)

// limitFlags are --memory, --pids and --cpu: the limits of a process's or a
// session's cgroup. 0, as unset, is the daemon's default (none unless its
// --default-limits sets one), as the API's zero or absent limit is.
type limitFlags struct {
	memory    limitSize
	pids, cpu int64
}

func addLimitFlags(fs *flag.FlagSet, of string) *limitFlags {
	l := &limitFlags{}
	const dflt = "; 0: the daemon's default, as unset"
	fs.Var(&l.memory, "memory", "bound the memory of the "+of+" and everything it starts to `bytes` (suffixes K, M, G)"+dflt)
	fs.Var((*count)(&l.pids), "pids", "bound the processes and threads of the "+of+" to `n` at once"+dflt)
	fs.Var((*count)(&l.cpu), "cpu", "bound the CPU of the "+of+" to `millicores` (1000: one core)"+dflt)
	return l
}

// count is a limit given as a whole number, 0 (the daemon's default) or
// more: a negative one is a usage error, as a --memory that is no size is.
type count int64

func (c *count) String() string { return strconv.FormatInt(int64(*c), 10) }

func (c *count) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a whole number, 0 (the daemon's default) or more")
	}
	*c = count(n)
	return nil
}

// limitSize is a memory limit: a size in bytes, as byteSize takes it, or 0
// (the daemon's default), which a byteSize refuses.
type limitSize int64

func (l *limitSize) String() string { return strconv.FormatInt(int64(*l), 10) }

func (l *limitSize) Set(s string) error {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n == 0 {
		*l = 0
		return nil
	}
	var b byteSize
	if err := b.Set(s); err != nil {
		return errors.New("want a size in bytes, like 8388608 or 8M, or 0 (the daemon's default)")
	}
	*l = limitSize(b)
	return nil
}

// limits returns the limits asked for, nil when none.
func (l *limitFlags) limits() *client.Limits {
	if l.memory == 0 && l.pids == 0 && l.cpu == 0 {
		return nil
	}
	return &client.Limits{MemoryBytes: int64(l.memory), Pids: l.pids, CPUMillis: l.cpu}
}

// printUsage writes what r cost on one line, as -v asks.
func printUsage(w io.Writer, r client.WaitResult) {
	if r.Usage == nil {
		return
	}
	line := fmt.Sprintf("conch: cpu %dms", r.Usage.CPUMs)
	if r.Usage.MemoryPeakBytes > 0 {
		line += fmt.Sprintf(", memory peak %.1f MiB", float64(r.Usage.MemoryPeakBytes)/(1<<20))
	}
	if r.OOMKilled {
		line += ", killed by the OOM killer at its memory limit"
	}
	fmt.Fprintln(w, line)
}
