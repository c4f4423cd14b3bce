package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/daemonrec"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/statefile"
	"github.com/conchsh/conch/shellsession"
)

// marked starts a sleep carrying the mark of instance, ended with the test.
func marked(t *testing.T, instance string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), proctree.InstanceEnv+"="+instance)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func writeRecord(t *testing.T, dir string, rec instance) string {
	t.Helper()
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	p := filepath.Join(dir, rec.ID+".json")
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// Only the leftovers of instances whose daemon is dead are ended: a record
// whose pid runs the process that started then is alive, whatever else
// carries a mark; a pid given to a later process does not keep a record
// alive, and ending its leftovers never touches that process.
func TestClearDeadSparesLiveInstances(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := filepath.Join(state, daemonrec.Dir)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	liveID, deadID, reusedID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	live, dead := marked(t, liveID), marked(t, deadID)

	liveRec := writeRecord(t, dir, instance{ID: liveID, Process: daemonrec.Self()})
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	streams := filepath.Join(t.TempDir(), streamDirName(deadID))
	require.NoError(t, os.MkdirAll(filepath.Join(streams, "conch-123"), 0o700))
	// As daemons before named it: by the whole id.
	oldStreams := filepath.Join(t.TempDir(), "conch-"+reusedID)
	require.NoError(t, os.Mkdir(oldStreams, 0o700))
	deadRec := writeRecord(t, dir, instance{ID: deadID, Process: daemonrec.Process{PID: gone.Process.Pid, StartTime: 1, BootID: daemonrec.BootID(), PIDNS: daemonrec.PIDNamespace()}, StreamDir: streams})
	// The pid of the live instance's process, started at another time.
	reusedRec := writeRecord(t, dir, instance{ID: reusedID, Process: daemonrec.Process{PID: live.Process.Pid, StartTime: 1, BootID: daemonrec.BootID(), PIDNS: daemonrec.PIDNamespace()}, StreamDir: oldStreams})
	// Not a directory of the dead instance's: never removed.
	foreign := filepath.Join(t.TempDir(), "conch-other")
	require.NoError(t, os.Mkdir(foreign, 0o700))
	writeRecord(t, dir, instance{ID: uuid.NewString(), Process: daemonrec.Process{PID: gone.Process.Pid, StartTime: 1, PIDNS: daemonrec.PIDNamespace()}, StreamDir: foreign})
	// Another pid namespace's record: its pid means another process here.
	otherNS := marked(t, uuid.NewString())
	otherRec := writeRecord(t, dir, instance{ID: otherNS.Env[len(otherNS.Env)-1][len(proctree.InstanceEnv)+1:], Process: daemonrec.Process{PID: gone.Process.Pid, StartTime: 1, BootID: daemonrec.BootID(), PIDNS: "pid:[1]"}})
	// A record that names no instance: never read as one whose mark is "".
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".json"), []byte(`{"id":"","pid":1}`), 0o600))

	var logs bytes.Buffer
	d := &daemon{log: slog.New(slog.NewTextHandler(&logs, nil))}
	d.clearDead(state, dir)

	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for proctree.Alive(dead.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, proctree.Alive(dead.Process.Pid), "the dead instance's process still runs")
	require.True(t, proctree.Alive(live.Process.Pid), "the live instance's process was ended")
	require.True(t, proctree.Alive(otherNS.Process.Pid), "another namespace's instance's process was ended")
	require.FileExists(t, otherRec)
	require.FileExists(t, liveRec)
	require.NoFileExists(t, deadRec)
	require.NoFileExists(t, reusedRec)
	require.NoDirExists(t, streams)
	require.NoDirExists(t, oldStreams)
	require.DirExists(t, foreign)
	require.Contains(t, logs.String(), "instance="+deadID)
	require.True(t, strings.Contains(logs.String(), "killed=1"), logs.String())
}

// TestClearDeadStreamDirsTaken: a dead instance whose stream directory a
// command removed, and another user then made anew (or put a link in its
// place), has its sessions' directories in one made beside it, named
// DIR-N: that one is removed, and the other user's directory, anything
// else named so, and what a link points to are left alone. Before, the
// one made beside it was left behind for good, and the other user's
// directory was removed, with what was in it, by root.
func TestClearDeadStreamDirsTaken(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make a directory another user owns")
	}
	state := t.TempDir()
	dir := filepath.Join(state, daemonrec.Dir)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	id := uuid.NewString()
	streams := filepath.Join(t.TempDir(), streamDirName(id))
	require.NoError(t, os.Mkdir(streams, 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(streams, "theirs"), nil, 0o666))
	require.NoError(t, os.Chown(streams, 65534, 65534))
	made := streams + "-1234567"
	require.NoError(t, os.MkdirAll(filepath.Join(made, "conch-123"), 0o700))
	foreignMade := streams + "-7654321"
	require.NoError(t, os.Mkdir(foreignMade, 0o700))
	require.NoError(t, os.Chown(foreignMade, 65534, 65534))
	elsewhere := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "precious"), nil, 0o600))
	link := streams + "-42"
	require.NoError(t, os.Symlink(elsewhere, link))
	notMade := streams + "-backup"
	require.NoError(t, os.Mkdir(notMade, 0o700))
	rec := writeRecord(t, dir, instance{ID: id, Process: daemonrec.Process{PID: gone.Process.Pid, StartTime: 1, BootID: daemonrec.BootID(), PIDNS: daemonrec.PIDNamespace()}, StreamDir: streams})

	d := &daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	d.clearDead(state, dir)
	require.NoFileExists(t, rec)
	require.NoDirExists(t, made)
	require.FileExists(t, filepath.Join(streams, "theirs"))
	require.DirExists(t, foreignMade)
	require.DirExists(t, notMade)
	require.FileExists(t, filepath.Join(elsewhere, "precious"))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode().Type())
}

// A session of `conch serve` writes its output through FIFOs under the
// instance's stream directory, and every frame names them: zsh and mksh
// read each frame a byte per read call, so each byte of the directory's
// name costs them a read call at each of a frame's paths (an instance
// directory named by the whole instance id made a zsh command cost its
// shell half as much CPU again, mksh a third). The paths of a session of
// the daemon are as short as an embedded session's, but for the instance's
// directory: "/conch-" and 8 characters of its id.
func TestServeStreamPathsAreShort(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	ctx := t.Context()
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err)
	const cmd = "readlink /proc/self/fd/1"
	r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: cmd}})
	require.NoError(t, err)
	served := strings.TrimSpace(r.Stdout)

	emb, err := shellsession.New(ctx, shellsession.Options{})
	require.NoError(t, err)
	defer emb.Close()
	c, _, err := emb.Run(ctx, shellsession.CommandOptions{Cmd: cmd})
	require.NoError(t, err)
	var out []byte
	for _, f := range c.Log().Page(0, 100).Frames {
		out = append(out, f.Data...)
	}
	embedded := strings.TrimSpace(string(out))

	// base/conch-N/1 against base/conch-ID/conch-N/1 (or 2: the streams
	// take turns).
	instance := filepath.Dir(filepath.Dir(served))
	require.Equal(t, filepath.Dir(filepath.Dir(embedded)), filepath.Dir(instance), "served %q, embedded %q", served, embedded)
	require.LessOrEqual(t, len(filepath.Base(instance)), len("conch-")+8, "served %q", served)
}

// A daemon outlives whatever reads its log: with its stderr a pipe whose
// reader went away (a log shipper restarting, `conch serve 2>&1 | head`),
// the next line it logs meets a broken pipe, which for stderr ends a Go
// program by SIGPIPE, and every session with it. The write fails instead;
// the daemon answers on, and the commands it starts still get SIGPIPE at
// its default disposition (`yes | head -1` ends yes by it).
func TestServeOutlivesItsLogReader(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	require.NoError(t, s.pipe.Close())
	<-s.stderr
	ctx := t.Context()
	const cmd = "yes | head -1 >/dev/null; echo ${PIPESTATUS[0]}"
	for range 3 {
		sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
		require.NoError(t, err)
		r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: cmd}})
		require.NoError(t, err)
		require.Equal(t, "141\n", r.Stdout, "yes ends by SIGPIPE in a session")
		o, _, err := s.c.Run(ctx, client.RunOptions{StartOptions: client.StartOptions{Cmd: cmd}})
		require.NoError(t, err)
		require.Equal(t, "141\n", o.Stdout, "yes ends by SIGPIPE in a one-shot")
		// The requests' log lines are written once the log buffer's
		// wait is over.
		time.Sleep(3 * logFlushAfter)
	}
	require.NoError(t, s.cmd.Process.Signal(syscall.Signal(0)), "the daemon is alive")
}

// A hang-up (the terminal `conch serve` runs on closed) stops the daemon as
// SIGTERM does, ending what its sessions started: by default it ended the
// daemon at once, and a session's background job ran on with no daemon to
// end it. Started with SIGHUP ignored (nohup), the daemon ignores it.
func TestServeHangUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		under []string
	}{
		{"stops", nil},
		{"nohup", []string{"bash", "-c", `trap '' HUP; exec "$@"`, "bash"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServeWith(t, serveSetup{under: tc.under}, "--drain-timeout", "0")
			ctx := t.Context()
			sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
			require.NoError(t, err)
			r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "sleep 120 & echo $!"}})
			require.NoError(t, err)
			pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
			require.NoError(t, err)
			start, ok := proctree.StartTime(pid)
			require.True(t, ok)
			jobAlive := func() bool { st, ok := proctree.StartTime(pid); return ok && st == start }

			require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
			if tc.under == nil {
				code, lines := s.exited(t)
				require.Equal(t, 0, code, "stderr: %s", strings.Join(lines, "\n"))
				require.False(t, jobAlive(), "the session's background job ended with the daemon")
				return
			}
			// Ignored: the daemon serves on (a signal it acted on would
			// have ended it or turned /readyz 503 within this wait).
			time.Sleep(200 * time.Millisecond)
			resp, _ := s.get(t, "GET", "/readyz", "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			r, _, err = s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo on"}})
			require.NoError(t, err)
			require.Equal(t, "on\n", r.Stdout)
			require.True(t, jobAlive())
		})
	}
}

// A daemon at its limit of open files refuses new work with 429
// resource_exhausted, saying which limit, and takes work again once some
// ended: it answered 500 internal ("pipe2: too many open files"), as for a
// bug. Each session holds 15 descriptors; 60 leave room for two or three.
//
// A start can need one more than a session holds: the daemon's move of
// its forker thread into a new spare cgroup, which the start sets off,
// holds a cgroup's tasks file open (for as long as the kernel waits a grace
// period) while the start opens its last ones. Three sessions filled the
// 60 exactly, and after one was deleted the next start was refused at its
// last descriptor (7 runs in 30, three runs at once): one session
// deleted at the limit does not always make room, two do.
func TestServeOutOfFiles(t *testing.T) {
	t.Parallel()
	// No drain: its sleep 60s would hold the stop past the 2 s the test
	// gives it, and a daemon killed then leaves its stream directory.
	s := startServeWith(t, serveSetup{under: []string{"bash", "-c", `ulimit -n 60 && exec "$@"`, "bash"}}, "--drain-timeout", "0")
	ctx := t.Context()
	var made []string
	var refused *client.Error
	for range 60 {
		sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
		if err != nil {
			require.ErrorAs(t, err, &refused)
			break
		}
		made = append(made, sess.ID)
	}
	require.NotNil(t, refused, "60 sessions fit in 60 open files")
	require.NotEmpty(t, made)
	require.Equal(t, http.StatusTooManyRequests, refused.Status, "%v", refused)
	require.Equal(t, client.CodeResourceExhausted, refused.Code)
	require.Contains(t, refused.Message, "open files (60")

	require.GreaterOrEqual(t, len(made), 2, "two sessions fit in 60 open files")
	require.NoError(t, s.c.DeleteSession(ctx, made[0]))
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		// One session's worth was not enough: refused as before, and
		// another gone makes room.
		require.ErrorAs(t, err, &refused)
		require.Equal(t, http.StatusTooManyRequests, refused.Status, "%v", refused)
		require.NoError(t, s.c.DeleteSession(ctx, made[1]))
		sess, err = s.c.CreateSession(ctx, client.SessionOptions{})
	}
	require.NoError(t, err, "a session fits once two have gone")
	r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo fits"}})
	require.NoError(t, err)
	// How the command ended, and what it said on stderr, tell a command
	// whose streams could not be opened from one whose output was lost.
	require.Equal(t, "fits\n", r.Stdout, "stderr %q, answer %+v", r.Stderr, *r)
}

// A daemon out of open files refuses a one-shot process with 429 too,
// whichever step of its start ran out: it answered some starts 201 with a
// process that had "failed" ("fork/exec /usr/bin/bash: too many open
// files", "enter v1 cgroup: open .../tasks: too many open files"), which
// blames the command, as for a missing program.
func TestServeOutOfFilesExec(t *testing.T) {
	t.Parallel()
	// No drain: its sleep 60s would hold the stop past the 2 s the test
	// gives it, and a daemon killed then leaves its stream directory.
	s := startServeWith(t, serveSetup{under: []string{"bash", "-c", `ulimit -n 60 && exec "$@"`, "bash"}}, "--drain-timeout", "0")
	// Each request is bounded: one that needs a new connection is not
	// accepted while the daemon has no descriptor for it.
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		t.Cleanup(cancel)
		return c
	}
	// Starts of each kind take 3 to 6 descriptors, for a moment or for
	// good, and the short ones give theirs back as they end: the daemon
	// runs out at each step of a start in turn.
	kinds := []client.StartOptions{{Cmd: "sleep 60"}, {Cmd: "sleep 0.1", Stdin: "open"}, {Cmd: "sleep 0.2", Kind: "pty"},
		{Cmd: "sleep 60", Stdin: "open"}, {Cmd: "sleep 0.1"}}
	refusals := 0
	for i := range 300 {
		p, err := s.c.Start(ctx(), kinds[i%len(kinds)])
		if err != nil {
			var refused *client.Error
			require.ErrorAs(t, err, &refused)
			require.Equal(t, http.StatusTooManyRequests, refused.Status, "%v", refused)
			require.Equal(t, client.CodeResourceExhausted, refused.Code)
			refusals++
			continue
		}
		require.NotEqual(t, "failed", string(p.Reason), "a start that ran out of files: %s", p.Error)
	}
	require.Positive(t, refusals, "300 processes fit in 60 open files")
}

// A daemon whose stderr is not read (a terminal held by Ctrl-S, a stalled
// log reader) answers on: its log lines wait, then are dropped. Each line
// was written under a lock every request's line takes, and once the pipe
// was full no request that logged was answered (/livez, which logs at
// debug, still was).
func TestServeStalledStderr(t *testing.T) {
	t.Parallel()
	s := startServeWith(t, serveSetup{stall: true}, "--log-level", "debug")
	ctx := t.Context()
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err)
	// A command logs about 600 bytes at debug; a page of pipe holds 4096,
	// and the lines waited in the buffer up to 64 KiB: about 100 commands.
	for i := range 300 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, _, err := s.c.RunCommand(cctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo " + strconv.Itoa(i)}})
		cancel()
		require.NoError(t, err, "command %d", i)
		require.Equal(t, strconv.Itoa(i)+"\n", r.Stdout)
	}
}

// metricsAddr is the address the daemon serves its metrics on, as it logs
// it ("serving metrics" addr=HOST:PORT).
func (s *served) metricsAddr(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, line := range s.lines {
			if _, rest, ok := strings.Cut(line, `msg="serving metrics" addr=`); ok {
				s.mu.Unlock()
				return strings.Fields(rest)[0]
			}
		}
		s.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the daemon did not say where it serves its metrics")
	return ""
}

// Idle connections to the metrics listener, which need no token, cannot
// take the descriptors the API needs: 386 of them (a GET /livez each, kept
// alive) left a daemon under `ulimit -n 400` answering nothing on the API
// port, not even 429, since the metrics listener had no bound. Past its
// bound a connection to it closes the one idle longest, so that every one
// is answered, and the API serves on.
func TestServeMetricsFloodSparesAPI(t *testing.T) {
	t.Parallel()
	s := startServeWith(t, serveSetup{under: []string{"bash", "-c", `ulimit -n 120 && exec "$@"`, "bash"}},
		"--drain-timeout", "0", "--metrics-listen", "127.0.0.1:0")
	addr := s.metricsAddr(t)
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 300 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		// An answer that does not come within 5 s is a daemon that cannot
		// accept: out of descriptors.
		require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
		_, err = io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			held = append(held, c)
			break
		}
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		held = append(held, c)
	}
	require.Len(t, held, 300, "every connection to the metrics listener is answered")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err, "the API answers with %d idle connections on the metrics listener", len(held))
	r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo served"}})
	require.NoError(t, err)
	require.Equal(t, "served\n", r.Stdout)
}

// smallShm is a command line that runs its arguments in a mount namespace
// of their own whose /dev/shm is a tmpfs of n inodes (its root one of
// them), so that a test can fill it without filling the machine's. The
// test is skipped where no mount namespace can be made.
func smallShm(t *testing.T, n int) []string {
	t.Helper()
	return shmNamespace(t, `mount -t tmpfs -o size=1m,nr_inodes=`+strconv.Itoa(n)+` tmpfs /dev/shm`)
}

// shmNamespace is a command line that runs its arguments in a mount
// namespace of their own, once the bash script setup (which mounts a
// /dev/shm of the test's own) succeeded. The test is skipped where no
// mount namespace can be made.
func shmNamespace(t *testing.T, setup string) []string {
	t.Helper()
	if out, err := exec.Command("unshare", "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("no mount namespace of its own: %v: %s", err, out)
	}
	return []string{"unshare", "-m", "--propagation", "private", "bash", "-c",
		"{ " + setup + `; } && exec "$@"`, "bash"}
}

// A /dev/shm full (of inodes, here, or of bytes: ENOSPC either way) is the
// machine's resource run out, not a bug: a new session is refused 429
// resource_exhausted, saying so, as for open files. It was 500 internal
// ("make stream directory: mkdir /dev/shm/conch-...: no space left on
// device").
func TestServeShmFull(t *testing.T) {
	t.Parallel()
	s := startServeWith(t, serveSetup{under: smallShm(t, 64)}, "--drain-timeout", "0")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err)
	// The session's shell shares the daemon's /dev/shm: it fills it.
	const fill = `i=0; while mkdir /dev/shm/fill$i 2>/dev/null; do i=$((i+1)); done; echo $i`
	r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: fill}})
	require.NoError(t, err)
	require.NotEqual(t, "0\n", r.Stdout, "nothing was left to fill")

	_, err = s.c.CreateSession(ctx, client.SessionOptions{})
	var refused *client.Error
	require.ErrorAs(t, err, &refused)
	require.Equal(t, http.StatusTooManyRequests, refused.Status, "%v", refused)
	require.Equal(t, client.CodeResourceExhausted, refused.Code)
	require.Contains(t, refused.Message, "no space left")

	r, _, err = s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "rm -r /dev/shm/fill*"}})
	require.NoError(t, err)
	require.NotNil(t, r.ExitCode)
	require.Zero(t, *r.ExitCode)
	_, err = s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err, "a session starts once there is room")
}

// A daemon that starts with /dev/shm full keeps its directories in the
// temp directory, as when /dev/shm is not writable. Full of inodes, it
// exited 1 ("stream directory: mkdir /dev/shm/conch-...: no space left on
// device"). Full of bytes, the directory was made there (a directory and
// FIFOs take no bytes on a tmpfs), and every code context was refused 429
// for the life of the daemon: its driver is a file with bytes in it.
func TestServeShmFullAtStart(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]string{
		"of inodes": `mount -t tmpfs -o size=1m,nr_inodes=1 tmpfs /dev/shm`,
		// head stops at the first write that finds no room.
		"of bytes": `mount -t tmpfs -o size=64k tmpfs /dev/shm && { head -c 1m /dev/zero >/dev/shm/fill; test -s /dev/shm/fill; }`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServeWith(t, serveSetup{under: shmNamespace(t, setup)}, "--drain-timeout", "0")
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
			require.NoError(t, err)
			r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "readlink /proc/self/fd/1; ls -A /dev/shm"}})
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(r.Stdout, filepath.Join(os.TempDir(), "conch-")), "the session's FIFOs are at %q", r.Stdout)
			_, shm, _ := strings.Cut(r.Stdout, "\n")
			require.NotContains(t, shm, "conch-", "the directory tried in /dev/shm is left")
		})
	}
}

// A start that cannot write its instance record (the state directory's
// file system full) leaves no half-written record behind: each such start
// left instances/ID.json.tmp for good. The instances directory is a tmpfs
// of one page, filled, in a mount namespace of the daemon's own.
func TestServeRecordUnwritable(t *testing.T) {
	t.Parallel()
	under := smallShm(t, 64) // for its skip
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	instances := filepath.Join(state, "conch", daemonrec.Dir)
	require.NoError(t, os.MkdirAll(instances, 0o700))
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("record-test-token\n"), 0o600))
	script := `mount -t tmpfs -o size=4k tmpfs "$1" && head -c 4096 /dev/zero >"$1/fill" || exit 99
conch serve --listen 127.0.0.1:0 --token-file "$2" 2>&1
echo "exit $?"; ls -a "$1"`
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, under[0], append(under[1:4], "bash", "-c", script, "bash", instances, tokenFile)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, client.EnvToken+"=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "no space left on device", "the record could not be written")
	_, left, ok := strings.Cut(string(out), "exit 1\n")
	require.True(t, ok, "%s", out)
	require.NotContains(t, left, ".json", "a record of the failed start is left")
}

// The start-up clean-up removes the temporary records dead daemons left (a
// start that failed as it wrote its record, before this was cleaned up at
// once), and only theirs: a live daemon's, being written as it starts, is
// left, and so is one too new to tell.
func TestClearDeadRemovesStaleTemps(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := filepath.Join(state, daemonrec.Dir)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	temp := func(rec instance) string {
		p := writeRecord(t, dir, rec)
		require.NoError(t, os.Rename(p, p+".tmp"))
		return p + ".tmp"
	}
	live := temp(instance{ID: uuid.NewString(), Process: daemonrec.Self()})
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	dead := temp(instance{ID: uuid.NewString(), Process: daemonrec.Process{PID: gone.Process.Pid, StartTime: 1, BootID: daemonrec.BootID(), PIDNS: daemonrec.PIDNamespace()}})
	// Empty, as a write that found no room leaves it: its daemon is not
	// known, but the moment between its write and its rename is long past.
	empty := filepath.Join(dir, uuid.NewString()+".json.tmp")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(empty, old, old))
	fresh := filepath.Join(dir, uuid.NewString()+".json.tmp")
	require.NoError(t, os.WriteFile(fresh, nil, 0o600))

	var logs bytes.Buffer
	d := &daemon{log: slog.New(slog.NewTextHandler(&logs, nil))}
	d.clearDead(state, dir)
	require.FileExists(t, live)
	require.NoFileExists(t, dead)
	require.NoFileExists(t, empty)
	require.FileExists(t, fresh)
}

// TestServeStateFilesPrivate: the token, daemon.json and the instance
// record are the user's alone (0600), and so is the state directory
// (0700), whatever the umask and whatever was left there: a state
// directory made 0755 is narrowed, and leftover temporary files of mode
// 0666 are replaced, not written through. Before, the token and
// daemon.json kept the leftovers' mode, -rw-rw-rw-, under umask 000, and
// the directory stayed 0755.
func TestServeStateFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	conchDir := filepath.Join(state, "conch")
	require.NoError(t, os.MkdirAll(filepath.Join(conchDir, daemonrec.Dir), 0o755))
	require.NoError(t, os.Chmod(conchDir, 0o755))
	for _, name := range []string{client.TokenFile, client.EndpointFile} {
		tmp := filepath.Join(conchDir, name+".tmp")
		require.NoError(t, os.WriteFile(tmp, []byte("left over"), 0o666))
		require.NoError(t, os.Chmod(tmp, 0o666))
	}
	cmd := exec.Command("bash", "-c", "umask 000; exec conch serve --listen 127.0.0.1:0")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, client.EnvToken+"=")
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	defer stopDaemon(cmd.Process, exited)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(conchDir, client.EndpointFile))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "conch serve wrote no daemon.json")
	records, err := filepath.Glob(filepath.Join(conchDir, daemonrec.Dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, records, 1)
	for _, p := range append(records, filepath.Join(conchDir, client.TokenFile), filepath.Join(conchDir, client.EndpointFile)) {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode(), "%s", p)
	}
	for _, d := range []string{conchDir, filepath.Join(conchDir, daemonrec.Dir)} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "%s", d)
	}
}

// --stream-dir puts the instance's stream directory, and with it every
// session's FIFOs and command file, in the directory named, made when
// missing: on a host shared with users the daemon's does not trust, one
// only it can write to, out of /dev/shm's reach.
func TestServeStreamDir(t *testing.T) {
	t.Parallel()
	private := filepath.Join(t.TempDir(), "private", "streams")
	s := startServeWith(t, serveSetup{}, "--drain-timeout", "0", "--stream-dir", private)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{})
	require.NoError(t, err)
	r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "readlink /proc/self/fd/1"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(r.Stdout, private+"/conch-"), "the session's FIFOs are at %q", r.Stdout)
}

// A daemon that starts reads only what can be an instance record: a FIFO
// named as a record, or as a temporary one, is left alone rather than
// waited on for ever, and so is a file larger than a record can be, even
// one that begins as the record of a dead instance. Before, such a FIFO
// hung every later `conch serve` as it started.
func TestClearDeadSkipsWhatIsNotARecord(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := filepath.Join(state, daemonrec.Dir)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	fifos := []string{filepath.Join(dir, uuid.NewString()+".json"), filepath.Join(dir, uuid.NewString()+".json.tmp")}
	for _, f := range fifos {
		require.NoError(t, syscall.Mkfifo(f, 0o600))
	}
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	rec, err := json.Marshal(instance{ID: uuid.NewString(), Process: daemonrec.Process{PID: gone.Process.Pid, StartTime: 1, BootID: daemonrec.BootID(), PIDNS: daemonrec.PIDNamespace()}})
	require.NoError(t, err)
	var id struct{ ID string }
	require.NoError(t, json.Unmarshal(rec, &id))
	large := filepath.Join(dir, id.ID+".json")
	require.NoError(t, os.WriteFile(large, append(rec, bytes.Repeat([]byte(" "), statefile.MaxSize)...), 0o600))

	var logs bytes.Buffer
	d := &daemon{log: slog.New(slog.NewTextHandler(&logs, nil))}
	done := make(chan struct{})
	go func() {
		d.clearDead(state, dir)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang guard
		for {
			// Let the stuck read go: O_RDWR never blocks on a FIFO, and
			// the read sees the end once it is closed.
			for _, fifo := range fifos {
				if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
					f.Close()
				}
			}
			select {
			case <-done:
				t.Fatal("clearDead waited 20 s on a FIFO named as a record")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for _, f := range fifos {
		require.FileExists(t, f)
	}
	require.FileExists(t, large, "a file larger than a record was read as one")
	require.Contains(t, logs.String(), "unreadable instance record left alone")
}
