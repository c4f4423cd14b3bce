package logstore

import (
	"context"
	"fmt"
	"slices"
)

// A follower copies at most this many frames, and about this many bytes of
// them, each time it takes the lock: the writer never waits long for it, and
// a follower stuck delivering a batch keeps little memory alive.
// A FollowLent takes at most lentBatchBytes (but at least one frame): a
// follower stuck delivering a frame, a stream whose client reads nothing,
// then keeps alive at most the block or two of that batch once retention
// dropped them.
const (
	batchFrames    = 256
	batchBytes     = 256 << 10
	lentBatchBytes = 4 << 10
)

// Event is one step of a Follow: exactly one field is set.
type Event struct {
	Frame   *Frame
	Warning *Warning
	End     bool // the log is closed and every frame was delivered
}

// Warning tells a follower that frames after its cursor were dropped before
// it read them (or, under KeepNone, were never kept); it goes on from
// FirstAvailable, the cursor of the next frame it gets.
type Warning struct {
	Message        string
	FirstAvailable Cursor
	// Bytes is how many bytes of output the follower missed, or -1 when
	// the log cannot tell (it started after a cursor already dropped).
	Bytes int64
}

// Follow calls yield with the frames after cursor after, then with frames as
// they are appended, then with an End event once the log is closed, and
// returns nil. It returns early when yield returns false (nil) or ctx is done
// (ctx.Err()). The Frame of an Event is the follower's own copy.
//
// A follower never holds the writer back: when it falls behind what is
// retained it gets a Warning and goes on from the oldest retained frame. A
// Warning is also the first event when frames after after are already gone;
// under KeepNone that is whenever after is older than the last frame, and the
// follower starts from the frames that come next.
func (l *Log) Follow(ctx context.Context, after Cursor, yield func(Event) bool) error {
	return l.follow(ctx, after, nil, yield)
}

// FollowLent is Follow for a yield that is done with a frame when it
// returns: the Frame and its Data are lent, valid only until yield returns,
// after which the log may put later output in their place. A follower that
// writes each frame out (or encodes it) as it comes should use it: output
// flooding through a full log it keeps up with then reuses the same few
// blocks, as it does with no follower, rather than leaving one to the
// garbage collector for every 64 KiB.
func (l *Log) FollowLent(ctx context.Context, after Cursor, yield func(Event) bool) error {
	var b borrower
	return l.follow(ctx, after, &b, yield)
}

// A borrower is a FollowLent's hold on the frames it is delivering: the
// blocks of those from pin to upTo are not reused (pin 0 holds nothing).
// batch is where it takes each batch.
type borrower struct {
	pin, upTo Cursor
	batch     []Frame
}

// follow is Follow, or FollowLent when b is not nil.
func (l *Log) follow(ctx context.Context, after Cursor, b *borrower, yield func(Event) bool) error {
	l.mu.Lock()
	l.followers++
	if b != nil {
		l.borrowers = append(l.borrowers, b)
	}
	// offset is the bytes of output up to after, while known.
	offset, known := l.offsetLocked(after)
	missed := func(upTo int64) int64 {
		n := int64(-1)
		if known {
			n = upTo - offset
		}
		offset, known = upTo, true
		return n
	}
	var warn *Warning
	if l.keep == KeepNone && after < l.last {
		warn = &Warning{
			Message:        fmt.Sprintf("keepLogs is none: frames after cursor %d were not kept; continuing from %d", after, l.last+1),
			FirstAvailable: l.last + 1,
			Bytes:          missed(l.droppedN + int64(l.size)),
		}
		// It goes on after the newest frame, which may be held for
		// another reader, unread: that frame must grow no more, or what
		// joined it would reach neither this follower nor its warning.
		after = l.last
		l.handLocked(after)
	}
	l.mu.Unlock()
	defer l.unfollow(b)

	if warn != nil && !yield(Event{Warning: warn}) {
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.mu.Lock()
		warn = nil
		if b != nil { // the last batch is delivered
			b.pin = 0
			clear(b.batch) // nor holds its blocks
		}
		if after < l.dropped {
			by := "retention"
			if l.evicted {
				by = "retention or the log budget"
			}
			warn = &Warning{
				Message:        fmt.Sprintf("frames after cursor %d were dropped by %s; continuing from %d", after, by, l.dropped+1),
				FirstAvailable: l.dropped + 1,
				Bytes:          missed(l.droppedN),
			}
			after = l.dropped
		}
		batch := l.batchLocked(after, b)
		closed := l.closed
		var wake chan struct{}
		if len(batch) == 0 && !closed {
			if l.wake == nil {
				l.wake = make(chan struct{})
			}
			wake = l.wake
		}
		l.mu.Unlock()

		if warn != nil && !yield(Event{Warning: warn}) {
			return nil
		}
		for i := range batch {
			if !yield(Event{Frame: &batch[i]}) {
				return nil
			}
			after = batch[i].Cursor
			offset += int64(len(batch[i].Data))
		}
		switch {
		case len(batch) > 0:
		case closed:
			yield(Event{End: true})
			return nil
		default:
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// batchLocked copies the next frames after cursor after, at most batchFrames
// of them and batchBytes of their bytes (but at least one), lent to b when b
// is not nil. l.mu must be held.
func (l *Log) batchLocked(after Cursor, b *borrower) []Frame {
	i, n := l.afterLocked(after)
	n = min(n, batchFrames)
	most := batchBytes
	if b != nil {
		most = lentBatchBytes
	}
	bytes := 0
	for k := range n {
		bytes += len(l.frames.at(i + k).Data)
		if bytes > most && k > 0 {
			n = k
			break
		}
	}
	if n == 0 {
		return nil
	}
	if b == nil {
		batch := make([]Frame, n)
		l.copyOutLocked(batch, i)
		return batch
	}
	batch := slices.Grow(b.batch[:0], n)[:n]
	b.batch = batch
	l.lendOutLocked(batch, i)
	b.pin, b.upTo = batch[0].Cursor, batch[n-1].Cursor
	return batch
}

// unfollow ends a Follow, or with b a FollowLent. Under KeepNone the frames
// were kept only for followers, so the last one to leave drops them.
func (l *Log) unfollow(b *borrower) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.followers--
	if i := slices.Index(l.borrowers, b); b != nil && i >= 0 {
		l.borrowers = slices.Delete(l.borrowers, i, i+1)
	}
	if l.keep == KeepNone && l.followers == 0 {
		l.dropAllLocked()
	}
}
