package main

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/procfs"
)

// throwawayUID returns a uid that no user of this machine has (no passwd
// entry) and that runs no process, for a daemon whose limit of processes
// nothing else should share: RLIMIT_NPROC counts every task of a uid, the
// machine over. Other runs of the test choose others (by their pid).
// The test is skipped unless it runs as root, which alone can start a
// process as another user.
func throwawayUID(t *testing.T) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs the daemon as a throwaway user, which takes root")
	}
	for i := range 1000 {
		uid := 64000 + (os.Getpid()+i)%1000
		if _, err := user.LookupId(strconv.Itoa(uid)); !errors.As(err, new(user.UnknownUserIdError)) {
			continue
		}
		if n, err := procfs.TasksOf(uid); err == nil && n == 0 {
			// Whatever the test leaves running as uid is ended after it.
			t.Cleanup(func() { endUser(t, uid) })
			return uid
		}
	}
	t.Skip("no uid of 64000-64999 is free")
	return 0
}

// endUser kills every process of uid, as that user (kill -9 -1 reaches
// only the user's own), and waits until they are gone: what a daemon that
// died left behind.
func endUser(t *testing.T, uid int) {
	kill := exec.Command("kill", "-9", "-1")
	kill.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	_ = kill.Run() // it fails when there was nothing to kill
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := procfs.TasksOf(uid)
		if err != nil || n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d tasks of uid %d are left", n, uid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// userDir returns a directory that uid owns and can reach (outside the
// test's own temporary directories, which only root may enter), removed
// when the test ends, and the conch binary linked into it.
func userDir(t *testing.T, uid int) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "conch-user-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chown(dir, uid, uid))
	src, err := exec.LookPath("conch")
	require.NoError(t, err)
	bin = filepath.Join(dir, "conch")
	if os.Link(src, bin) != nil { // another file system: a copy serves
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(bin, b, 0o755))
	}
	return dir, bin
}

// A daemon at its user's limit of processes (RLIMIT_NPROC, as a pids
// cgroup's limit does) refuses new work with 429 and serves on: it
// aborted ("runtime/cgo: pthread_create failed: Resource temporarily
// unavailable", SIGABRT), every session lost. Each session (each running
// process) holds a thread of the daemon, waiting for its end, and the Go
// runtime cannot go on without a thread it asks for: a start that took the
// last process left none for its wait. A command fills the room with
// processes of its own, then each slot it frees is taken by a session,
// then requests come at once, then sessions are made until refused: each
// request is answered, 201 or 429.
func TestServeAtProcessLimit(t *testing.T) {
	t.Parallel()
	uid := throwawayUID(t)
	const limit = 50
	s := startServeWith(t, serveSetup{uid: uid, under: []string{"bash", "-c", `ulimit -u ` + strconv.Itoa(limit) + ` && exec "$@"`, "bash"}},
		"--drain-timeout", "0")
	serveAtLimit(t, s, limit)
}

// A daemon in a pids cgroup at its max (a container's limit) is the same:
// the limit counts its threads and every process it and its commands run.
// The cgroup is a v1 one (a v2 one's processes must be in leaves, where a
// daemon's own cgroups are not), and the daemon puts nothing in cgroups of
// its own (whose pids would then count there, not in the test's).
func TestServeAtPidsLimit(t *testing.T) {
	t.Parallel()
	const limit = 50
	dir := pidsCgroup(t, limit)
	s := startServeWith(t, serveSetup{under: []string{"bash", "-c", `echo $$ >` + filepath.Join(dir, "cgroup.procs") + ` && exec "$@"`, "bash"}},
		"--drain-timeout", "0", "--containment", "none")
	serveAtLimit(t, s, limit)
}

// pidsCgroup makes a cgroup of the v1 pids hierarchy whose pids.max is
// limit, and when the test ends kills what is left in it and removes it.
// The test is skipped where there is none to write to.
func pidsCgroup(t *testing.T, limit int) string {
	t.Helper()
	const root = "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil || os.Geteuid() != 0 {
		t.Skip("no writable v1 pids hierarchy at " + root)
	}
	dir := filepath.Join(root, "conch-test-pids-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no v1 pids cgroup: %v", err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second) // a hang guard
		for {
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			pids := strings.Fields(string(b))
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("processes %v are left in %s", pids, dir)
				return
			}
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(t, syscall.Rmdir(dir))
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(limit)), 0o644))
	return dir
}

// serveAtLimit is the test of a daemon that the limit of processes bounds.
func serveAtLimit(t *testing.T, s *served, limit int) {
	s.mu.Lock()
	said := slices.ContainsFunc(s.lines, func(l string) bool { return strings.Contains(l, `msg="threads reserved"`) })
	s.mu.Unlock()
	require.True(t, said, "the daemon says what it reserved under a limit")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// answered fails the test unless err is nil or a 429: a daemon gone
	// answers nothing.
	answered := func(err error, what string) bool {
		t.Helper()
		if err == nil {
			return true
		}
		var refused *client.Error
		require.ErrorAs(t, err, &refused, "%s: the daemon died?\n%s", what, s.stderrTail())
		require.Equal(t, http.StatusTooManyRequests, refused.Status, "%s: %v", what, refused)
		require.Equal(t, client.CodeResourceExhausted, refused.Code)
		return false
	}
	first, err := s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err)
	// dash, whose forks do not retry as bash's do, until one is refused.
	r, _, err := s.c.RunCommand(ctx, first.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{
		Cmd: `dash -c 'while sleep 600 >/dev/null 2>&1 & do echo $!; done' 2>&1`}})
	require.NoError(t, err)
	require.Contains(t, r.Stdout, "fork", "the forks were refused")
	var sleeps []int
	for _, f := range strings.Fields(r.Stdout) {
		if pid, err := strconv.Atoi(f); err == nil {
			sleeps = append(sleeps, pid)
		}
	}
	require.NotEmpty(t, sleeps)

	// A slot freed by the command is taken by a session, whose wait needs
	// a thread: each time, the daemon has one more to wait on.
	for made := 0; made < 14; {
		_, err := s.c.CreateSession(ctx, client.SessionOptions{})
		if answered(err, "session "+strconv.Itoa(made)+" at the limit") {
			made++
			continue
		}
		require.NotEmpty(t, sleeps, "no slot left to free")
		require.NoError(t, syscall.Kill(sleeps[0], syscall.SIGKILL))
		deadline := time.Now().Add(10 * time.Second) // a hang guard
		for gone := false; !gone; {
			_, err := os.Stat("/proc/" + strconv.Itoa(sleeps[0]))
			gone = errors.Is(err, fs.ErrNotExist)
			require.True(t, gone || time.Now().Before(deadline), "the killed process %d is not reaped", sleeps[0])
			time.Sleep(10 * time.Millisecond)
		}
		sleeps = sleeps[1:]
	}

	errs := make([]error, 12)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			if i%2 == 0 {
				_, errs[i] = s.c.CreateSession(ctx, client.SessionOptions{})
			} else {
				_, errs[i] = s.c.Start(ctx, client.StartOptions{Cmd: "true"})
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		answered(err, "request "+strconv.Itoa(i)+" at the limit")
	}

	// The command's processes gone, sessions are made until refused.
	for _, pid := range sleeps {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	refused := false
	for i := 0; i < limit && !refused; i++ {
		_, err := s.c.CreateSession(ctx, client.SessionOptions{})
		refused = !answered(err, "session "+strconv.Itoa(i))
	}
	require.True(t, refused, "%d sessions under a limit of %d processes", limit, limit)

	resp, _ := s.get(t, "GET", "/healthz", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r, _, err = s.c.RunCommand(ctx, first.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo alive"}})
	require.NoError(t, err)
	require.Equal(t, "alive\n", r.Stdout, "a session made before serves on")
}

// stderrTail is the last lines the daemon wrote to stderr, from a fatal
// error's on when there is one.
func (s *served) stderrTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := max(0, len(s.lines)-15)
	for i, l := range s.lines {
		if strings.HasPrefix(l, "runtime/cgo: ") || strings.HasPrefix(l, "fatal error: ") {
			from = i
			break
		}
	}
	return strings.Join(s.lines[from:min(len(s.lines), from+15)], "\n")
}
