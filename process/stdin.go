package process

import (
	"errors"
	"fmt"
)

// StdinQueueLimit bounds the bytes written to a process's stdin that it has
// not read yet. A write never waits for the process to read: it is queued,
// and a write that does not fit is refused at once with a StdinFullError.
const StdinQueueLimit = 1 << 20

// ErrStdinFull is what a StdinFullError is (errors.Is).
var ErrStdinFull = errors.New("stdin queue is full")

// StdinFullError refuses a stdin write that does not fit in the queue: the
// first Accepted bytes of it were queued, the rest were not.
type StdinFullError struct {
	Accepted int // bytes of the write that were queued
	Queued   int // bytes in the queue before the write
	Limit    int // the queue's bound
}

func (e *StdinFullError) Error() string {
	return fmt.Sprintf("stdin queue is full: %d bytes queued that the process has not read, at most %d: accepted %d bytes of the write",
		e.Queued, e.Limit, e.Accepted)
}

// Is makes errors.Is(err, ErrStdinFull) true.
func (e *StdinFullError) Is(target error) bool { return target == ErrStdinFull }

// StdinQueue is the accounting of a bounded stdin queue: it says how much
// of a write fits. The caller holds its own lock around its methods.
type StdinQueue struct {
	Queued int // bytes written and not yet taken by the process
}

// Admit returns how many bytes of a write of n fit, and the error to
// return when not all of them do. It counts what fits as queued.
func (q *StdinQueue) Admit(n int) (int, error) {
	room := max(StdinQueueLimit-q.Queued, 0)
	if n <= room {
		q.Queued += n
		return n, nil
	}
	err := &StdinFullError{Accepted: room, Queued: q.Queued, Limit: StdinQueueLimit}
	q.Queued += room
	return room, err
}
