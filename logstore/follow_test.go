package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangGuard bounds a blocking test: the test's context, ended after d.
func hangGuard(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// record follows l from after until End, ctx or stop, copying events.
func record(ctx context.Context, l *Log, after Cursor) ([]Event, error) {
	var evs []Event
	err := l.Follow(ctx, after, func(e Event) bool {
		if e.Frame != nil {
			f := *e.Frame
			e.Frame = &f
		}
		evs = append(evs, e)
		return true
	})
	return evs, err
}

// checkStream checks a follower's events from cursor after against a log
// that ended with last and retained: consecutive cursors, a gap only right
// after a warning that names where it goes on, the bytes of every retained
// frame, End last.
func checkStream(evs []Event, after, last Cursor, retained []Frame, allowWarnings bool) error {
	if len(evs) == 0 || !evs[len(evs)-1].End {
		return errors.New("no End at the end")
	}
	byCursor := make(map[Cursor]Frame, len(retained))
	for _, f := range retained {
		byCursor[f.Cursor] = f
	}
	prev := after
	var warned *Warning
	for _, e := range evs[:len(evs)-1] {
		switch {
		case e.Warning != nil:
			if !allowWarnings {
				return fmt.Errorf("warning: %s", e.Warning.Message)
			}
			warned = e.Warning
		case e.Frame != nil:
			c := e.Frame.Cursor
			if warned != nil {
				if c != warned.FirstAvailable || c <= prev {
					return fmt.Errorf("after a warning to go on from %d, frame %d follows %d", warned.FirstAvailable, c, prev)
				}
			} else if c != prev+1 {
				return fmt.Errorf("frame %d follows %d without a warning", c, prev)
			}
			warned = nil
			prev = c
			if f, ok := byCursor[c]; ok && !sameFrame(f, *e.Frame) {
				return fmt.Errorf("frame %d differs from the log's", c)
			}
		default:
			return errors.New("End before the end")
		}
	}
	if prev != last {
		return fmt.Errorf("last frame %d, the log's last %d", prev, last)
	}
	return nil
}

func TestFollowCatchesUpGoesLiveAndEnds(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, 20*time.Second)
	l := New(Options{})
	l.Write(Stdout, []byte("before\n"))
	got := make(chan Event)
	errc := make(chan error, 1)
	go func() {
		errc <- l.Follow(ctx, 0, func(e Event) bool {
			select {
			case got <- e:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	next := func() Event {
		select {
		case e := <-got:
			return e
		case <-ctx.Done():
			t.Fatal("no event")
			return Event{}
		}
	}
	e := next()
	require.False(t, e.Frame == nil || string(e.Frame.Data) != "before\n", "first event %+v", e)
	l.Write(Stderr, []byte("live\n"))
	e = next()
	require.False(t, e.Frame == nil || string(e.Frame.Data) != "live\n" || e.Frame.Channel != Stderr, "live event %+v", e)
	l.Close()
	e = next()
	require.True(t, e.End, "after Close: %+v", e)
	require.NoError(t, <-errc, "Follow")
}

func TestFollowWarnings(t *testing.T) {
	t.Parallel()
	const line = "0123456789abcdef"
	budget := 4 * len(line) // four frames of one line
	tests := []struct {
		name    string
		keep    KeepLogs
		writes  int
		after   Cursor
		warning Cursor // FirstAvailable of the first event's warning; 0: none
		bytes   int64  // the warning's Bytes
		frames  []Cursor
	}{
		{name: "nothing dropped", writes: 4, frames: span(1, 4)},
		{name: "from the start, head dropped", writes: 6, warning: 3, bytes: 2 * int64(len(line)), frames: span(3, 6)},
		{name: "from a dropped cursor", writes: 6, after: 1, warning: 3, bytes: -1, frames: span(3, 6)},
		{name: "from the newest dropped cursor", writes: 6, after: 2, frames: span(3, 6)},
		{name: "from a retained cursor", writes: 6, after: 4, frames: span(5, 6)},
		{name: "from the last cursor", writes: 6, after: 6},
		{name: "none, from the start", keep: KeepNone, writes: 3, warning: 4, bytes: 3 * int64(len(line))},
		{name: "none, from the last cursor", keep: KeepNone, writes: 3, after: 3},
		{name: "none, nothing written", keep: KeepNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(Options{Retention: budget, Keep: tt.keep})
			for range tt.writes {
				writeFrame(l, Stdout, []byte(line))
			}
			l.Close()
			evs, err := record(hangGuard(t, 20*time.Second), l, tt.after)
			require.NoError(t, err)
			if tt.warning != 0 {
				require.False(t, len(evs) == 0 || evs[0].Warning == nil || evs[0].Warning.FirstAvailable != tt.warning, "events %+v: want a warning to go on from %d first", evs, tt.warning)
				require.Equal(t, tt.bytes, evs[0].Warning.Bytes, "bytes missed")
				evs = evs[1:]
			}
			var got []Cursor
			for _, e := range evs[:len(evs)-1] {
				require.NotNil(t, e.Frame, "unexpected event %+v", e)
				got = append(got, e.Frame.Cursor)
			}
			assert.False(t, !slices.Equal(got, tt.frames) || !evs[len(evs)-1].End, "frames %v then %+v, want %v then End", got, evs[len(evs)-1], tt.frames)
		})
	}
}

// TestKeepNoneLiveFollowers checks that under KeepNone a follower gets the
// frames written while it follows, a follower arriving later is told what
// it missed, and nothing stays once the followers leave.
func TestKeepNoneLiveFollowers(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, 20*time.Second)
	l := New(Options{Keep: KeepNone})
	l.Write(Stdout, []byte("unseen\n"))

	var first []Event
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		first, err = record(ctx, l, 1)
		assert.NoError(t, err)
	})
	// The first follower is in once it has registered; wait for it.
	for {
		l.mu.Lock()
		n := l.followers
		l.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("follower never started")
		case <-time.After(time.Millisecond):
		}
	}
	l.Write(Stdout, []byte("one\n"))
	l.Write(Stderr, []byte("two\n"))

	second := make(chan []Event, 1)
	wg.Go(func() {
		evs, err := record(ctx, l, 0)
		assert.NoError(t, err)
		second <- evs
	})
	p := l.Page(0, 0)
	assert.False(t, len(p.Frames) != 0 || !p.TruncatedHead, "page of a KeepNone log: %+v", p)
	l.Close()
	wg.Wait()

	assert.False(t, len(first) != 3 || first[0].Frame == nil || string(first[0].Frame.Data) != "one\n" ||
		first[1].Frame == nil || string(first[1].Frame.Data) != "two\n" || !first[2].End, "first follower: %+v", first)
	evs := <-second
	assert.False(t, len(evs) != 2 || evs[0].Warning == nil || evs[0].Warning.FirstAvailable != 4 || !evs[1].End, "second follower: %+v", evs)
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.False(t, l.frames.len() != 0 || l.followers != 0, "%d frames and %d followers left", l.frames.len(), l.followers)
}

// TestManyFollowers runs followers from several cursors while two writers
// append random output; every follower gets every frame once, in order.
func TestManyFollowers(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, 30*time.Second)
	l := New(Options{Retention: 64 << 20})
	l.Write(Stdout, []byte("head\n"))
	const followers = 20
	results := make([][]Event, followers)
	var wg sync.WaitGroup
	for i := range followers {
		wg.Go(func() {
			var err error
			results[i], err = record(ctx, l, Cursor(i%2))
			assert.NoError(t, err)
		})
	}
	var writers sync.WaitGroup
	for _, ch := range []Channel{Stdout, Stderr} {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ch), 1))
			for range 2000 {
				l.Write(ch, randomBytes(rng, rng.IntN(2000), true))
			}
		})
	}
	writers.Wait()
	l.Close()
	wg.Wait()
	p := l.Page(0, 0)
	require.False(t, p.TruncatedHead, "retention dropped frames")
	for i, evs := range results {
		assert.NoError(t, checkStream(evs, Cursor(i%2), p.Last, p.Frames, false), "follower %d", i)
	}
}

// TestSlowFollower blocks one follower in the middle of delivering while the
// writer goes on, in lockstep with a second follower: neither the writer nor
// the second follower waits for the slow one, which gets a warning and a
// jump when it goes on.
func TestSlowFollower(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, 30*time.Second)
	l := New(Options{Retention: 64 << 10})
	l.Write(Stdout, []byte("first\n"))

	stuck, release := make(chan struct{}), make(chan struct{})
	var slow []Event
	var wg sync.WaitGroup
	wg.Go(func() {
		once := false
		err := l.Follow(ctx, 0, func(e Event) bool {
			if e.Frame != nil {
				f := *e.Frame
				e.Frame = &f
			}
			slow = append(slow, e)
			if !once {
				once = true
				close(stuck)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return true
		})
		assert.NoError(t, err)
	})
	<-stuck

	seen := make(chan Cursor, 1)
	var fast []Event
	wg.Go(func() {
		err := l.Follow(ctx, 0, func(e Event) bool {
			if e.Frame != nil {
				f := *e.Frame
				e.Frame = &f
				select {
				case seen <- f.Cursor:
				case <-ctx.Done():
					return false
				}
			}
			fast = append(fast, e)
			return true
		})
		assert.NoError(t, err)
	})
	c := <-seen
	require.Equal(t, Cursor(1), c, "fast follower started at")
	line := bytes.Repeat([]byte("x"), 1000)
	for i := range 2000 {
		l.Write(Stdout, line)
		select {
		case c := <-seen:
			require.Equal(t, Cursor(i+2), c, "fast follower got %d after write %d", c, i+2)
		case <-ctx.Done():
			t.Fatalf("fast follower stalled at write %d", i+2)
		}
	}
	l.Close()
	close(release)
	wg.Wait()

	p := l.Page(0, 0)
	assert.NoError(t, checkStream(fast, 0, p.Last, p.Frames, false), "fast follower")
	assert.NoError(t, checkStream(slow, 0, p.Last, p.Frames, true), "slow follower")
	assert.False(t, len(slow) < 2 || slow[1].Warning == nil, "slow follower got no warning after falling behind")
	// What each got and what its warnings say it missed add up to every byte.
	for name, evs := range map[string][]Event{"fast": fast, "slow": slow} {
		var n int64
		for _, e := range evs {
			switch {
			case e.Frame != nil:
				n += int64(len(e.Frame.Data))
			case e.Warning != nil:
				n += e.Warning.Bytes
			}
		}
		assert.Equal(t, int64(len("first\n")+2000*len(line)), n, "%s follower's bytes and gaps", name)
	}
}

func TestFollowerLeaves(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cancel  bool // cancel the context while the follower waits
		stopAt  int  // or stop after this many events from yield
		wantErr error
	}{
		{name: "context cancelled while waiting", cancel: true, wantErr: context.Canceled},
		{name: "yield stops", stopAt: 2},
		{name: "yield stops at once", stopAt: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			guard := hangGuard(t, 20*time.Second)
			ctx, cancel := context.WithCancel(guard)
			defer cancel()
			l := New(Options{})
			writeFrame(l, Stdout, []byte("a"))
			writeFrame(l, Stdout, []byte("b"))
			writeFrame(l, Stdout, []byte("c"))
			n := 0
			done := make(chan error, 1)
			go func() {
				done <- l.Follow(ctx, 0, func(Event) bool {
					n++
					if tt.cancel && n == 3 {
						cancel()
					}
					return n != tt.stopAt
				})
			}()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, tt.wantErr, "Follow returned, want %v", tt.wantErr)
			case <-guard.Done():
				t.Fatal("Follow did not return")
			}
			assert.False(t, tt.stopAt > 0 && n != tt.stopAt, "yield called %d times after it said stop at %d", n, tt.stopAt)
			l.mu.Lock()
			defer l.mu.Unlock()
			assert.Equal(t, 0, l.followers, "%d followers left", l.followers)
		})
	}
}

// TestPageWhileWriting pages through a log of many small frames, larger than
// one copy step, while a writer keeps dropping its head: every page is
// consecutive frames, and it starts where asked unless it says truncatedHead.
func TestPageWhileWriting(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, 30*time.Second)
	l := New(Options{Retention: 4 * pageStep * BytesPerFrame})
	for range 3 * pageStep {
		writeFrame(l, Stdout, []byte("x"))
	}
	p := l.Page(0, 0)
	require.False(t, len(p.Frames) != 3*pageStep || p.TruncatedHead, "%d frames, truncatedHead %v", len(p.Frames), p.TruncatedHead)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				l.Write(Stderr, []byte("y"))
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := 0; i < 100 && ctx.Err() == nil; i++ {
		after := Cursor(i * 100)
		p := l.Page(after, 0)
		require.NotEmpty(t, p.Frames, "empty page after %d", after)
		require.False(t, !p.TruncatedHead && p.Frames[0].Cursor != after+1, "page after %d starts at %d without truncatedHead", after, p.Frames[0].Cursor)
		for k := 1; k < len(p.Frames); k++ {
			require.Equal(t, p.Frames[k-1].Cursor+1, p.Frames[k].Cursor, "page after %d: %d follows %d", after, p.Frames[k].Cursor, p.Frames[k-1].Cursor)
		}
		require.Equal(t, p.Frames[len(p.Frames)-1].Cursor, p.Next, "Next %d, last frame %d", p.Next, p.Frames[len(p.Frames)-1].Cursor)
	}
}

// lockstep runs followers (Follow or FollowLent, as the test passes them)
// on l in goroutines and returns a write that puts a piece of output in the
// log and returns once each follower has been handed it, and a stop that
// ends the followers and waits for them.
func lockstep(t *testing.T, l *Log, follows ...func(context.Context, Cursor, func(Event) bool) error) (write func(p []byte), stop func()) {
	ctx, cancel := context.WithCancel(hangGuard(t, time.Minute))
	got := make(chan Cursor)
	var wg sync.WaitGroup
	_, _, after := l.Bounds()
	for _, follow := range follows {
		wg.Go(func() {
			_ = follow(ctx, after, func(e Event) bool {
				if e.Frame == nil {
					return true
				}
				select {
				case got <- e.Frame.Cursor:
					return true
				case <-ctx.Done():
					return false
				}
			})
		})
	}
	write = func(p []byte) {
		l.Write(Stdout, p)
		_, _, last := l.Bounds()
		for waiting := len(follows); waiting > 0; {
			select {
			case c := <-got:
				if c == last {
					waiting--
				}
			case <-ctx.Done():
				t.Fatal("a follower fell behind for a minute")
			}
		}
	}
	return write, func() { cancel(); wg.Wait() }
}

// TestLentFramesStayWhileDelivered holds a FollowLent in the middle of
// delivering a frame while output floods through the log many times over:
// the frame's bytes must not change until yield returns, though its block
// was dropped long before.
func TestLentFramesStayWhileDelivered(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, time.Minute)
	const retention = 1 << 20
	l := New(Options{Retention: retention})
	piece := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 16<<10) }
	for i := range 4 * retention / (16 << 10) { // the frames that follow are in blocks
		l.Write(Stdout, piece(i))
	}
	_, _, after := l.Bounds()
	holding, flooded := make(chan []byte), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = l.FollowLent(ctx, after, func(e Event) bool {
			if e.Frame == nil {
				return true
			}
			holding <- e.Frame.Data
			<-flooded
			return false
		})
	})
	l.Write(Stdout, piece(0))
	data := <-holding
	want := bytes.Clone(data)
	for i := range 16 * retention / (16 << 10) {
		l.Write(Stdout, piece(i+1))
	}
	assert.True(t, bytes.Equal(data, want), "a lent frame's bytes changed while it was delivered: %q… became %q…", want[:8], data[:8])
	close(flooded)
	wg.Wait()
}

// TestKeptFramesSurviveLentFollowers floods a log followed by a FollowLent
// and by a Follow that keeps every frame it gets: the blocks the lent
// follower lets go are reused, never those the keeping follower was handed.
func TestKeptFramesSurviveLentFollowers(t *testing.T) {
	t.Parallel()
	const retention = 1 << 20
	l := New(Options{Retention: retention})
	var kept [][]byte
	keep := func(ctx context.Context, after Cursor, yield func(Event) bool) error {
		return l.Follow(ctx, after, func(e Event) bool {
			if e.Frame != nil {
				kept = append(kept, e.Frame.Data)
			}
			return yield(e)
		})
	}
	write, stop := lockstep(t, l, l.FollowLent, keep)
	var want [][]byte
	for i := range 8 * retention / (16 << 10) {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 16<<10)
		write(p)
		want = append(want, p)
	}
	stop()
	require.Len(t, kept, len(want))
	for i := range want {
		if !bytes.Equal(kept[i], want[i]) {
			t.Fatalf("frame %d of those a Follow kept changed after the log reused its block: %q… became %q…", i, want[i][:8], kept[i][:8])
		}
	}
}

// TestKeepNoneFollowerStartIsFinal: under KeepNone a follower arriving late
// goes on after the newest frame, which another reader holds for its answer
// but has not read yet; that frame grows no more then. It once took later
// small writes, which the new follower, told it would go on from the next
// frame, never got.
func TestKeepNoneFollowerStartIsFinal(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t, 20*time.Second)
	l := New(Options{Keep: KeepNone})
	l.now = fixedClock()
	release := l.Hold() // an answer waiting for the output: the frames stay
	defer release()
	l.Write(Stdout, []byte("before\n"))
	var got []Event
	err := l.Follow(ctx, 0, func(e Event) bool {
		if e.Warning != nil {
			l.Write(Stdout, []byte("after\n"))
			l.Close()
		}
		if e.Frame != nil {
			f := *e.Frame
			e.Frame = &f
		}
		got = append(got, e)
		return true
	})
	require.NoError(t, err)
	require.False(t, len(got) != 3 || got[0].Warning == nil || got[1].Frame == nil ||
		string(got[1].Frame.Data) != "after\n" || got[1].Frame.Cursor != got[0].Warning.FirstAvailable || !got[2].End,
		"events %+v", got)
}
