package inputwait

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/reapertest"
)

// helperEnv makes the test binary a Go program that reads a line from its
// stdin: a process of several threads, most parked on futexes, one maybe in
// the runtime's epoll.
const helperEnv = "INPUTWAIT_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Print(line)
		os.Exit(0)
	}
	reapertest.Main(m)
}

// hangGuard bounds every wait for a state; it is not a timing assertion.
const hangGuard = time.Minute

// proc is a process tree started for a test.
type proc struct {
	cmd *exec.Cmd
	in  Input
}

// pids lists the tree: its root and the root's descendants, now.
func (p *proc) pids() []int {
	root := p.cmd.Process.Pid
	return append([]int{root}, proctree.Descendants(root)...)
}

// command returns the command for argv, skipping the test when its program
// is not installed.
func command(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("%s not installed", argv[0])
	}
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "TERM=dumb", "HOME="+t.TempDir())
	cmd.WaitDelay = time.Second
	return cmd
}

// startCmd starts cmd and kills its tree when the test ends.
func startCmd(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := proctree.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proctree.Signal(cmd.Process.Pid, syscall.SIGKILL, true)
		_ = proctree.Wait(cmd)
	})
}

// start starts argv with stdin and ExtraFiles given and returns it with its
// stdout on a reader.
func start(t *testing.T, stdin *os.File, extra []*os.File, argv ...string) (*proc, *bufio.Reader) {
	t.Helper()
	cmd := command(t, argv...)
	cmd.Stdin = stdin
	cmd.ExtraFiles = extra
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startCmd(t, cmd)
	return &proc{cmd: cmd}, bufio.NewReader(out)
}

// startPiped starts argv with its stdin on a pipe that the test holds open.
func startPiped(t *testing.T, argv ...string) *proc {
	t.Helper()
	r, w := pipe(t)
	p, _ := start(t, r, nil, argv...)
	r.Close()
	in, err := InputOf(w)
	if err != nil {
		t.Fatal(err)
	}
	p.in = in
	return p
}

// socketpair returns the two ends of a Unix stream socket pair.
func socketpair(t *testing.T) (sock, peer *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock, peer = os.NewFile(uintptr(fds[0]), "sock"), os.NewFile(uintptr(fds[1]), "peer")
	t.Cleanup(func() { sock.Close(); peer.Close() })
	return sock, peer
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// eventually fails the test unless cond holds before the hang guard.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("still not so after %v: %s", hangGuard, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waiting(t *testing.T, p *proc) bool {
	t.Helper()
	ok, err := Waiting(p.pids(), p.in)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// describe says what each thread of the tree is blocked in, for failures
// and logs.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		tids, _ := tasks(pid)
		for _, tid := range tids {
			dir := fmt.Sprintf("/proc/%d/task/%d", pid, tid)
			sc, _ := os.ReadFile(dir + "/syscall")
			call := strings.Fields(string(sc)) // the number and the first four arguments
			s, _ := stat(dir)
			fmt.Fprintf(&b, "%d/%d %s %c %s\n", pid, tid, strings.TrimSpace(string(comm)), s,
				strings.Join(call[:min(len(call), 5)], " "))
		}
	}
	return b.String()
}

// seenWaiting waits until the tree is seen waiting for input.
func seenWaiting(t *testing.T, p *proc) {
	t.Helper()
	eventually(t, "waiting for input", func() bool { return waiting(t, p) })
	t.Logf("waiting:\n%s", describe(p.pids()))
}

var readers = []struct {
	name string
	argv []string
}{
	{"bash read", []string{"bash", "-c", "read x"}},
	{"dash read", []string{"dash", "-c", "read x"}},
	{"zsh read", []string{"zsh", "-c", "read x"}},
	{"mksh read", []string{"mksh", "-c", "read x"}},
	{"ksh read", []string{"ksh", "-c", "read x"}},
	{"busybox sh read", []string{"busybox", "sh", "-c", "read x"}},
	{"python3 input", []string{"python3", "-c", "input()"}},
	{"head -1", []string{"head", "-1"}},
	{"pipeline cat | grep", []string{"sh", "-c", "cat | grep x"}},
	{"node stdin", []string{"node", "-e", `process.stdin.on("data", () => process.exit(0))`}},
	{"python3 select", []string{"python3", "-c", "import select, sys; select.select([sys.stdin], [], [])"}},
	{"python3 poll", []string{"python3", "-c", "import select; p = select.poll(); p.register(0); p.poll()"}},
	{"python3 asyncio", []string{"python3", "-c", "import asyncio, sys; l = asyncio.new_event_loop(); l.add_reader(0, l.stop); l.run_forever()"}},
	{"read after a child ran", []string{"bash", "-c", "true; /bin/true; read x; echo $x"}},
}

// Each reader, with its stdin on a pipe, is seen waiting for input.
func TestReadersOnPipe(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	readers := append(readers, struct {
		name string
		argv []string
	}{"go program", []string{"env", helperEnv + "=1", exe}})
	for _, tc := range readers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seenWaiting(t, startPiped(t, tc.argv...))
		})
	}
}

// A reader whose stdin is a named FIFO, as a session command's stdin is, is
// seen waiting when the Input is taken from the FIFO's write end.
func TestReaderOnFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "in")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // O_RDWR: opening does not wait for a reader
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := start(t, r, nil, "bash", "-c", "read x")
	r.Close()
	if p.in, err = InputOf(w); err != nil {
		t.Fatal(err)
	}
	seenWaiting(t, p)
}

// What an error reading /proc/PID/syscall means.
func TestSyscallFileError(t *testing.T) {
	t.Parallel()
	exists, gone := t.TempDir(), filepath.Join(t.TempDir(), "gone")
	for _, tc := range []struct {
		dir  string
		err  error
		want error
	}{
		{exists, syscall.ENOENT, ErrUnsupported}, // the thread is there, the file is not
		{gone, syscall.ENOENT, nil},              // the thread exited
		{exists, syscall.ESRCH, nil},
		{exists, syscall.EACCES, ErrPermission},
		{exists, syscall.EPERM, ErrPermission},
	} {
		got := syscallFileError(tc.dir, tc.err)
		if tc.want == nil && got != nil || tc.want != nil && !errors.Is(got, tc.want) {
			t.Errorf("syscallFileError(%s, %v) = %v, want %v", tc.dir, tc.err, got, tc.want)
		}
	}
}

// settled waits until every thread of the tree sleeps and the process named
// comm in it is blocked in a system call, so that a look now sees the state
// the test means.
func settled(t *testing.T, p *proc, comm string) {
	t.Helper()
	eventually(t, comm+" blocked, the rest asleep", func() bool {
		found := false
		for _, pid := range p.pids() {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			tids, _ := tasks(pid)
			for _, tid := range tids {
				dir := fmt.Sprintf("/proc/%d/task/%d", pid, tid)
				if s, _ := stat(dir); s != 'S' {
					return false
				}
				sc, err := readSyscall(dir)
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(string(c)) == comm && sc.blocked {
					found = true
				}
			}
		}
		return found
	})
}

// notWaiting checks a few looks at a settled tree all say "not waiting".
func notWaiting(t *testing.T, p *proc) {
	t.Helper()
	for range 5 {
		if waiting(t, p) {
			t.Fatalf("seen waiting for input:\n%s", describe(p.pids()))
		}
	}
}

func TestSleepIsNotWaiting(t *testing.T) {
	t.Parallel()
	p := startPiped(t, "sleep", "30")
	settled(t, p, "sleep")
	notWaiting(t, p)
}

// A reader among processes of which one sleeps on a timer is not waiting:
// the sleeper goes on without input.
func TestReaderBesideSleeperIsNotWaiting(t *testing.T) {
	t.Parallel()
	p := startPiped(t, "bash", "-c", "sleep 30 & read x")
	settled(t, p, "sleep")
	rootReads(t, p)
	notWaiting(t, p)
}

// A reader beside a job stopped by a signal is waiting: at a terminal, the
// prompt after Ctrl-Z waits for the user, the job for a continue. A stopped
// job made the tree busy, and an interact on an interactive shell with one
// came back only at its timeout.
func TestReaderBesideStoppedJobIsWaiting(t *testing.T) {
	t.Parallel()
	p := startPiped(t, "bash", "-c", "sleep 30 & kill -STOP $!; read x")
	rootReads(t, p)
	eventually(t, "the job stopped", func() bool {
		for _, pid := range p.pids() {
			if s, _ := stat(fmt.Sprintf("/proc/%d", pid)); s == 'T' {
				return true
			}
		}
		return false
	})
	seenWaiting(t, p)
}

// rootReads waits until the root of the tree is blocked reading the
// input.
func rootReads(t *testing.T, p *proc) {
	t.Helper()
	eventually(t, "the root reading the input", func() bool {
		tr := &tree{in: p.in, pids: p.pids()}
		defer tr.peers.close()
		v, err := tr.thread(p.cmd.Process.Pid, task{tid: p.cmd.Process.Pid})
		if err != nil {
			t.Fatal(err)
		}
		return v == readingInput
	})
}

// A process blocked reading something fed from outside the tree makes the
// tree not wait, though another process of it reads the input: a FIFO, a
// pipe, a socket whose peer is outside. The file is fd 3, made fd 0 of a
// background subshell of dash.
func TestReadingOtherFilesIsNotWaiting(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fw, err := os.OpenFile(fifo, os.O_RDWR, 0) // the writer, outside the tree
	if err != nil {
		t.Fatal(err)
	}
	ff, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close(); ff.Close() })
	pr, _ := pipe(t)
	sock, _ := socketpair(t)
	for name, f := range map[string]*os.File{"fifo": ff, "pipe": pr, "socket": sock} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, w := pipe(t)
			p, _ := start(t, r, []*os.File{f}, "dash", "-c", "read y <&3 & read x")
			in, err := InputOf(w)
			if err != nil {
				t.Fatal(err)
			}
			p.in = in
			settled(t, p, "dash")
			rootReads(t, p)
			eventually(t, "two processes", func() bool { return len(p.pids()) == 2 })
			settled(t, p, "dash")
			notWaiting(t, p)
		})
	}
}

// A server that reads keyboard shortcuts from its stdin while it listens on
// a socket is not waiting for input: a connection lets it go on.
func TestListeningReaderIsNotWaiting(t *testing.T) {
	t.Parallel()
	p := startPiped(t, "node", "-e", `require("net").createServer().listen(0, "127.0.0.1");
process.stdin.on("data", () => {})`)
	settled(t, p, "node")
	// It registers stdin in its epoll set only once it runs its loop: look
	// until it is blocked there, then every look says no.
	eventually(t, "node in epoll_pwait", func() bool {
		sc, err := readSyscall(fmt.Sprintf("/proc/%d/task/%d", p.cmd.Process.Pid, p.cmd.Process.Pid))
		return err == nil && sc.blocked && callOf(sc.nr) == callEpollWait
	})
	notWaiting(t, p)
}

// Waiting on stdin with a timeout is not waiting for input: the timeout lets
// it go on.
func TestPollWithTimeoutIsNotWaiting(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]string{
		"select": "import select, sys; print('in', flush=True); select.select([sys.stdin], [], [], 60)",
		"poll":   "import select; p = select.poll(); p.register(0); print('in', flush=True); p.poll(60000)",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, w := pipe(t)
			p, out := start(t, r, nil, "python3", "-c", script)
			r.Close()
			in, err := InputOf(w)
			if err != nil {
				t.Fatal(err)
			}
			p.in = in
			if line, _ := out.ReadString('\n'); line != "in\n" {
				t.Fatalf("python3 said %q", line)
			}
			settled(t, p, "python3")
			notWaiting(t, p)
		})
	}
}

// A process whose stdin is /dev/null reads end-of-file and never waits for
// it, also when it then blocks reading something else.
func TestDevNullStdinIsNotWaiting(t *testing.T) {
	t.Parallel()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	pr, _ := pipe(t)
	p, out := start(t, null, []*os.File{pr}, "dash", "-c", "read x; echo eof $?; read y <&3")
	if p.in, err = InputOf(null); err != nil {
		t.Fatal(err)
	}
	if line, _ := out.ReadString('\n'); line != "eof 1\n" {
		t.Fatalf("dash said %q", line)
	}
	settled(t, p, "dash")
	notWaiting(t, p)
}

// The pipe reader's verdicts, without a tree: a zero Input matches nothing.
func TestZeroInputMatchesNothing(t *testing.T) {
	t.Parallel()
	p := startPiped(t, "dash", "-c", "read x")
	seenWaiting(t, p)
	if ok, err := Waiting(p.pids(), Input{}); err != nil || ok {
		t.Fatalf("Waiting with the zero Input = %v, %v", ok, err)
	}
}

func BenchmarkWaitingPipeline(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	cmd := exec.Command("sh", "-c", "cat | grep x")
	cmd.Stdin = r
	if err := proctree.Start(cmd); err != nil {
		b.Fatal(err)
	}
	r.Close()
	defer func() {
		_ = proctree.Signal(cmd.Process.Pid, syscall.SIGKILL, true)
		_ = proctree.Wait(cmd)
	}()
	in, err := InputOf(w)
	if err != nil {
		b.Fatal(err)
	}
	pids := func() []int { return append([]int{cmd.Process.Pid}, proctree.Descendants(cmd.Process.Pid)...) }
	deadline := time.Now().Add(hangGuard)
	for {
		if ok, _ := Waiting(pids(), in); ok && len(pids()) == 3 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the pipeline is not seen waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
	list := pids()
	b.ResetTimer()
	for b.Loop() {
		if ok, err := Waiting(list, in); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// readerBeside starts a reader of its stdin beside a reader of other, on
// fd 3, and returns it once both read and the tree is seen not waiting:
// other is input from outside.
func readerBeside(t *testing.T, other *os.File) *proc {
	t.Helper()
	r, w := pipe(t)
	p, _ := start(t, r, []*os.File{other}, "dash", "-c", "read y <&3 & read x")
	in, err := InputOf(w)
	if err != nil {
		t.Fatal(err)
	}
	p.in = in
	eventually(t, "two processes", func() bool { return len(p.pids()) == 2 })
	settled(t, p, "dash")
	notWaiting(t, p)
	return p
}

// A reader of a socket whose peer the caller named quiet (the engine's end
// of a driver's control socket) is idle: beside a reader of the input, the
// tree waits for input. Without the name it does not.
func TestQuietPeer(t *testing.T) {
	t.Parallel()
	sock, peer := socketpair(t)
	p := readerBeside(t, sock)
	in := p.in
	ino, err := SocketInode(peer)
	if err != nil {
		t.Fatal(err)
	}
	p.in = in.WithQuietPeers(0, ino)
	seenWaiting(t, p)
}

// A reader of a pipe that a kin process writes (a child an earlier cell left
// running, whose output the interpreter's loop still takes) is idle once
// that process is named kin: beside a reader of the input, the tree waits.
// Without the name the pipe is input from outside, and it does not.
func TestKinWriter(t *testing.T) {
	t.Parallel()
	pr, pw := pipe(t)
	writer := command(t, "sleep", "300")
	writer.ExtraFiles = []*os.File{pw}
	startCmd(t, writer)
	pw.Close()
	p := readerBeside(t, pr)
	in := p.in
	p.in = in.WithKin([]int{writer.Process.Pid})
	seenWaiting(t, p)
}
