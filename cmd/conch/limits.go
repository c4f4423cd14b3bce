package main

import (
	"flag"
	"fmt"
	"io"

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
	fs.Int64Var(&l.pids, "pids", 0, "bound the processes and threads of the "+of+" to `n` at once")
	fs.Int64Var(&l.cpu, "cpu", 0, "bound the CPU of the "+of+" to `millicores` (1000: one core)")
	return l
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
