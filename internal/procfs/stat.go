package procfs

import (
	"bytes"
	"strconv"
)

// Stat is what is read of /proc/PID/stat.
type Stat struct {
	PID, PPID, PGID, SID int
	State                byte   // R, S, D, Z, T, ...
	Flags                uint64 // the kernel's PF_ flags
	Start                uint64 // clock ticks after boot
}

// ReadStat reads /proc/PID/stat; false when pid names no process (or one
// whose file says nothing readable).
func ReadStat(pid int) (Stat, bool) {
	var buf [512]byte
	b, err := ReadFile("/proc/"+strconv.Itoa(pid)+"/stat", buf[:0])
	if err != nil {
		return Stat{}, false
	}
	return ParseStat(pid, b)
}

// ParseStat parses what /proc/PID/stat holds, the one parser of it. The
// command name is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func ParseStat(pid int, b []byte) (Stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, false
	}
	f := bytes.Fields(b[i+2:]) // field 3 (state) onwards: state ppid pgrp session ...
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, false
	}
	s := Stat{PID: pid, State: f[0][0]}
	s.PPID, _ = strconv.Atoi(string(f[1]))
	s.PGID, _ = strconv.Atoi(string(f[2]))
	s.SID, _ = strconv.Atoi(string(f[3]))
	s.Flags, _ = strconv.ParseUint(string(f[6]), 10, 64)   // field 9
	start, err := strconv.ParseUint(string(f[19]), 10, 64) // field 22
	if err != nil {
		return Stat{}, false
	}
	s.Start = start
	return s, true
}

// StartTime returns when pid started, in clock ticks after boot (field 22
// of /proc/PID/stat); false for a zombie, as for a pid that names no
// process. With the boot's id, it tells a process from a later one that
// was given the same pid.
func StartTime(pid int) (uint64, bool) {
	s, ok := ReadStat(pid)
	if !ok || s.State == 'Z' {
		return 0, false
	}
	return s.Start, true
}
