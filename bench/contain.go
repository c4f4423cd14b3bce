package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/shellsession"
)

// containedRoot opens a Root of the bench's own, or says why it cannot.
func containedRoot() (*containment.Root, error) {
	r := containment.Open(containment.Config{Instance: "bench-" + strconv.Itoa(os.Getpid())})
	if r.Mode() == containment.ModeNone {
		return nil, errors.New("no containment here: " + r.Reason())
	}
	return r, nil
}

// newSessionIn starts a bash session in a cgroup of root's (nil: none).
func newSessionIn(ctx context.Context, root *containment.Root) (*shellsession.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return shellsession.New(ctx, shellsession.Options{Containment: root})
}

// measureP14 is P1 in a session in a cgroup of its own (membership, and
// the usage read around each command) against P1 in a session without.
func measureP14(ctx context.Context, cfg config) Row {
	root, err := containedRoot()
	if err != nil {
		return failed(err)
	}
	defer root.Destroy()
	in, err := newSessionIn(ctx, root)
	if err != nil {
		return failed(err)
	}
	defer closeSession(in)
	out, err := newSessionIn(ctx, nil)
	if err != nil {
		return failed(err)
	}
	defer closeSession(out)
	v, base, err := alternate(cfg.reps, func() error { return runIn(ctx, in, "true") },
		func() error { return runIn(ctx, out, "true") })
	if err != nil {
		return failed(err)
	}
	row := latencyRow(v, base, 1.05, "≤ 1.05×")
	row.Note += "; containment " + describeRoot(root)
	return row
}

// measureP14b is P9, session creation until the first command can run,
// with a cgroup of its own (made, entered at the shell's clone, and
// removed at its end) against without.
func measureP14b(ctx context.Context, cfg config) Row {
	root, err := containedRoot()
	if err != nil {
		return failed(err)
	}
	defer root.Destroy()
	create := func(r *containment.Root) (time.Duration, error) {
		t := time.Now()
		s, err := newSessionIn(ctx, r)
		if err != nil {
			return 0, err
		}
		d := time.Since(t)
		closeSession(s)
		return d, nil
	}
	if _, err := create(root); err != nil {
		return failed(err)
	}
	var v, base samples
	for range cfg.slow {
		d, err := create(root)
		if err != nil {
			return failed(err)
		}
		v = append(v, d)
		if d, err = create(nil); err != nil {
			return failed(err)
		}
		base = append(base, d)
	}
	row := latencyRow(v, base, 1.3, "≤ 1.3×")
	row.Note += "; containment " + describeRoot(root)
	return row
}

// describeRoot says where the limits of root's cgroups would go.
func describeRoot(r *containment.Root) string {
	s := string(r.Mode())
	for _, c := range []string{"memory", "pids", "cpu"} {
		if w, ok := r.Controllers()[c]; ok {
			s += " " + c + ":" + w
		}
	}
	return s
}
