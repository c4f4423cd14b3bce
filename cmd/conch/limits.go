package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/conchsh/conch/client"
)

// limitFlags are --memory, --pids and --cpu: the limits of a process's or a
// session's cgroup.
type limitFlags struct {
	memory    byteSize
	pids, cpu int64
}

func addLimitFlags(fs *flag.FlagSet, of string) *limitFlags {
	l := &limitFlags{}
	fs.Var(&l.memory, "memory", "bound the memory of the "+of+" and everything it starts to `bytes` (suffixes K, M, G)")
	fs.Var((*count)(&l.pids), "pids", "bound the processes and threads of the "+of+" to `n` at once")
	fs.Var((*count)(&l.cpu), "cpu", "bound the CPU of the "+of+" to `millicores` (1000: one core)")
	return l
}

// count is a limit given as a whole number, 0 (no limit) or more: a
// negative one is a usage error, as a --memory that is no size is.
type count int64

func (c *count) String() string { return strconv.FormatInt(int64(*c), 10) }

func (c *count) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a whole number, 0 (no limit) or more")
	}
	*c = count(n)
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
