package inputwait

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxFDs bounds the descriptor sets read from a process's memory; a larger
// poll or select counts as busy.
const maxFDs = 4096

// The poll bits for writing that x/sys/unix does not name (asm-generic
// values, the same on amd64 and arm64).
const (
	pollWrNorm = 0x100
	pollWrBand = 0x200
)

// readMem reads n bytes at addr of pid's memory. A bad address (the thread
// moved on and the memory changed) gives nil and no error.
func readMem(pid int, addr uint64, n int) ([]byte, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("inputwait: pid %d memory: %w", pid, ErrPermission)
	}
	if err != nil {
		return nil, nil
	}
	defer unix.Close(fd)
	b := make([]byte, n)
	if k, err := unix.Pread(fd, b, int64(addr)); err != nil || k != n {
		return nil, nil
	}
	return b, nil
}

// poll tells what a thread blocked in poll or ppoll waits for: the nfds
// struct pollfd {int fd; short events; short revents} at addr.
func (t *tree) poll(pid int, dir string, addr, nfds uint64, forever bool) (verdict, error) {
	if !forever || nfds > maxFDs {
		return busy, nil
	}
	if nfds == 0 {
		return idle, nil // waits for a signal, like pause
	}
	b, err := readMem(pid, addr, int(nfds)*8)
	if b == nil {
		return busy, err
	}
	var ws []watch
	for i := 0; i < len(b); i += 8 {
		fd := int32(binary.NativeEndian.Uint32(b[i:]))
		events := binary.NativeEndian.Uint16(b[i+4:])
		if fd < 0 { // an entry poll skips
			continue
		}
		ws = append(ws, watch{int(fd), events&(unix.POLLOUT|pollWrNorm|pollWrBand) != 0})
	}
	return t.waitSet(dir, ws), nil
}

// selectSets tells what a thread blocked in select or pselect6 waits for:
// the fd_set bitmaps of nfds bits at rAddr (read) and wAddr (write), either
// NULL.
func (t *tree) selectSets(pid int, dir string, nfds, rAddr, wAddr uint64, forever bool) (verdict, error) {
	if !forever || nfds > maxFDs {
		return busy, nil
	}
	n := int(nfds+63) / 64 * 8 // fd_set is an array of longs
	var ws []watch
	for _, set := range []struct {
		addr  uint64
		write bool
	}{{rAddr, false}, {wAddr, true}} {
		if set.addr == 0 {
			continue
		}
		b, err := readMem(pid, set.addr, n)
		if b == nil {
			return busy, err
		}
		for _, fd := range setBits(b, int(nfds)) {
			ws = append(ws, watch{fd, set.write})
		}
	}
	return t.waitSet(dir, ws), nil
}

// setBits returns the descriptors below nfds whose bits are set in the
// fd_set b (little-endian longs on every architecture this package knows,
// so bit i is bit i%8 of byte i/8).
func setBits(b []byte, nfds int) []int {
	var fds []int
	for fd := range nfds {
		if b[fd/8]&(1<<(fd%8)) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}
