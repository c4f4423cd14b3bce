// Package inputwait tells whether a process tree is waiting for input: it
// cannot go on until someone writes to its stdin pipe or terminal.
//
// A tree waits for input when, in one look at /proc, a thread of it is
// blocked reading that input, and every other thread of it is blocked in a
// wait that only the tree itself could end: reading a pipe that a process of
// the tree writes (the stages of a pipeline after the reader) or a Unix
// socket whose peer it holds (the self-pipe of Python's asyncio), waiting
// for a child, a signal, or another thread (futex), reading a socket whose
// peer the caller named quiet (see [Input.WithQuietPeers]: the engine's end
// of a driver's control socket), or polling only such files.
// A thread stopped by a signal (a job stopped with Ctrl-Z, SIGSTOP) waits
// too: only a continue, which at a terminal the user gives at the prompt,
// makes it go on. A thread that runs, is traced, sleeps on a timer, or waits on anything
// from outside (a socket, a FIFO or terminal that is not the input,
// inotify, a poll with a timeout) makes the tree not wait. Futex waits count
// as blocked whatever their timeout: runtimes park idle threads on futexes
// with long timeouts (Go's sysmon). A pipe counts as written by the tree
// when a process of the tree (or one the caller names its kin, see
// [Input.WithKin]) holds it open for writing; whether a process
// outside holds it too is not looked at (that would take reading every
// process's files). So `read x` in a shell waits, `sleep 5` does not,
// and neither does a dev server that reads keyboard shortcuts from its
// stdin while it listens on a socket.
//
// A thread is seen reading the input when it is blocked in read, readv,
// pread64, preadv or preadv2 of a file that is the input, or in poll, ppoll,
// select, pselect6, epoll_wait, epoll_pwait or epoll_pwait2 with no timeout
// and the input among the files it waits to read (readline waits in
// pselect6, node and other event loops in epoll_pwait). The input is
// recognised by its identity (a pipe's inode, a FIFO's device and inode, a
// terminal's device number), not by its file descriptor number, so a
// process that dup'ed it or reopened its terminal is seen too, and so is one
// that reads /dev/tty when the input is its controlling terminal (ssh
// asking about a host key, sudo for a password).
//
// What it reads: for each thread, /proc/PID/task/TID/stat (its state) and
// /proc/PID/task/TID/syscall (the call it is blocked in and its arguments);
// the files of the descriptors involved through /proc/PID/task/TID/fd; for
// poll and select, the descriptor sets in the process's memory
// (/proc/PID/mem); for epoll, the set in /proc/PID/task/TID/fdinfo/EPFD.
//
// Where it cannot tell: /proc/PID/syscall and /proc/PID/mem need the right
// to ptrace the process (root, or the same user and, under Yama's default
// ptrace_scope 1, an ancestor, as the engine is of what it starts), and /proc/PID/syscall exists only on kernels built with
// CONFIG_HAVE_ARCH_TRACEHOOK and on architectures whose system call numbers
// this package knows (amd64 and arm64). Then [Waiting] returns an error
// ([ErrPermission], [ErrUnsupported]) rather than an answer. A 32-bit
// process on a 64-bit kernel has other system call numbers and is seen as
// busy.
//
// A look costs a few dozen reads of /proc: about 70 system calls and 0.3 ms
// of CPU for a pipeline of three processes.
//
// The answer is a snapshot: threads move between the reads it makes. A
// caller that acts on a true answer should look twice, a moment apart. It
// does not know whether output of the tree is still in a pipe unread; that
// is for the caller, who reads it.
package inputwait
