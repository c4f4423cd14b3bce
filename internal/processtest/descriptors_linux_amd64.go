package processtest

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeDescriptors closes fds in process pid through ptrace: it stops the
// process, which sleeps in a system call, runs close(2) for each at the
// instruction of that call, and restarts the call with its own registers,
// as the kernel would have when the stop ended.
func closeDescriptors(pid int, fds []int) (err error) {
	runtime.LockOSThread() // every request comes from the tracer's thread
	if err := unix.PtraceSeize(pid); err != nil {
		return errSkip{fmt.Sprintf("cannot trace process %d: %v", pid, err)}
	}
	defer func() {
		if derr := unix.PtraceDetach(pid); err == nil && derr != nil {
			err = fmt.Errorf("detach: %w", derr)
		}
	}()
	if err := unix.PtraceInterrupt(pid); err != nil {
		return fmt.Errorf("interrupt: %w", err)
	}
	if err := awaitStop(pid); err != nil {
		return err
	}
	var saved unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &saved); err != nil {
		return fmt.Errorf("get registers: %w", err)
	}
	if int64(saved.Orig_rax) < 0 {
		return errors.New("the process is not in a system call")
	}
	at := uintptr(saved.Rip - 2) // the syscall instruction it sleeps in
	insn := make([]byte, 2)
	if _, err := unix.PtracePeekText(pid, at, insn); err != nil {
		return fmt.Errorf("read its code: %w", err)
	}
	if insn[0] != 0x0f || insn[1] != 0x05 {
		return fmt.Errorf("no syscall instruction before %#x: % x", saved.Rip, insn)
	}
	for _, fd := range fds {
		r := saved
		r.Rip, r.Rax, r.Orig_rax, r.Rdi = uint64(at), unix.SYS_CLOSE, ^uint64(0), uint64(fd)
		if err := unix.PtraceSetRegs(pid, &r); err != nil {
			return fmt.Errorf("set registers: %w", err)
		}
		for range 2 { // to the call's entry, then its exit
			if err := unix.PtraceSyscall(pid, 0); err != nil {
				return fmt.Errorf("resume: %w", err)
			}
			if err := awaitStop(pid); err != nil {
				return err
			}
		}
		if err := unix.PtraceGetRegs(pid, &r); err != nil {
			return fmt.Errorf("get registers: %w", err)
		}
		if ret := int64(r.Rax); ret != 0 {
			return fmt.Errorf("close(%d) in process %d: %v", fd, pid, syscall.Errno(-ret))
		}
	}
	// The call it slept in starts again, as it would have after the stop
	// (its result then was one of the kernel's restart codes).
	r := saved
	r.Orig_rax = ^uint64(0)
	switch int64(saved.Rax) {
	case -512, -513, -514: // ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND
		r.Rip, r.Rax = uint64(at), saved.Orig_rax
	case -516: // ERESTART_RESTARTBLOCK
		r.Rip, r.Rax = uint64(at), unix.SYS_RESTART_SYSCALL
	}
	if err := unix.PtraceSetRegs(pid, &r); err != nil {
		return fmt.Errorf("set registers: %w", err)
	}
	return nil
}

// awaitStop waits for the tracee's next stop.
func awaitStop(pid int) error {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("wait for process %d: %w", pid, err)
		case !ws.Stopped():
			return fmt.Errorf("process %d ended: %v", pid, ws)
		}
		return nil
	}
}
