package inputwait

import "golang.org/x/sys/unix"

// legacyCalls are the system calls of amd64 that newer architectures dropped
// for their more general forms.
var legacyCalls = map[int]call{
	unix.SYS_POLL:       callPoll,
	unix.SYS_SELECT:     callSelect,
	unix.SYS_EPOLL_WAIT: callEpollWait,
	unix.SYS_PAUSE:      callIdle,
}

const unknownArch = false
