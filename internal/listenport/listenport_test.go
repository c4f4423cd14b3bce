package listenport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
)

const helperEnv = "LISTENPORT_HELPER"

// TestMain doubles as a helper process: with helperEnv set it listens on an
// IPv4 and, when the host has it, an IPv6 loopback port, connects to the
// first, prints "v4port v6port clientport" (v6port 0 without IPv6) and waits
// for its stdin to close.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

func helper() int {
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	v6 := 0
	if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		v6 = l6.Addr().(*net.TCPAddr).Port
	}
	c, err := net.Dial("tcp4", l4.Addr().String())
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if _, err := l4.Accept(); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(l4.Addr().(*net.TCPAddr).Port, v6, c.LocalAddr().(*net.TCPAddr).Port)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// start starts cmd with its stdin on a pipe kept open and returns the first
// line it prints; the process tree is killed when the test ends.
func start(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	cmd.WaitDelay = time.Second
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proctree.Signal(cmd.Process.Pid, syscall.SIGKILL, true)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %q: %v", cmd.Path, line, err)
	}
	return line
}

func ports(t *testing.T, pids ...int) []int {
	t.Helper()
	p, err := Ports(pids)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A Go program's IPv4 and IPv6 listeners are found; its connected sockets
// (client and accepted side) are not listeners and add nothing.
func TestGoListener(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var v4, v6, client int
	line := start(t, cmd)
	if _, err := fmt.Sscan(line, &v4, &v6, &client); err != nil {
		t.Fatalf("helper said %q", line)
	}
	want := []int{v4}
	if v6 != 0 {
		want = append(want, v6)
	} else {
		t.Log("no IPv6 loopback here: IPv4 only")
	}
	slices.Sort(want)
	if got := ports(t, cmd.Process.Pid); !slices.Equal(got, want) {
		t.Errorf("Ports = %v, want %v (client port %d)", got, want, client)
	}
}

var servingPort = regexp.MustCompile(`port (\d+)`)

// python3 -m http.server 0, started by a shell, listens on the port it
// prints; it is found through the tree's pids, not the shell's alone.
func TestPythonHTTPServerInTree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	cmd := exec.CommandContext(t.Context(), "sh", "-c", "python3 -u -m http.server 0 --bind 127.0.0.1 & wait")
	line := start(t, cmd)
	m := servingPort.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("http.server said %q", line)
	}
	port, _ := strconv.Atoi(m[1])
	sh := cmd.Process.Pid
	if got := ports(t, sh); len(got) != 0 {
		t.Errorf("the shell alone listens on %v", got)
	}
	tree := append([]int{sh}, proctree.Descendants(sh)...)
	if got := ports(t, tree...); !slices.Equal(got, []int{port}) {
		t.Errorf("Ports(%v) = %v, want [%d]", tree, got, port)
	}
}

// A server in a network namespace of its own is found in that namespace's
// table, which this process's /proc/net/tcp does not show.
func TestOtherNetworkNamespace(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	if err := exec.CommandContext(t.Context(), "unshare", "-n", "true").Run(); err != nil {
		t.Skipf("cannot make a network namespace here: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), "unshare", "-n", "python3", "-u", "-m", "http.server", "0")
	line := start(t, cmd)
	m := servingPort.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("http.server said %q", line)
	}
	port, _ := strconv.Atoi(m[1])
	if got := ports(t, cmd.Process.Pid); !slices.Equal(got, []int{port}) {
		t.Errorf("Ports = %v, want [%d]", got, port)
	}
}

// A process that listens on nothing has no ports, also while this process
// listens on one.
func TestNoListener(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.CommandContext(t.Context(), "sh", "-c", "echo started; exec sleep 30")
	if line := start(t, cmd); !strings.HasPrefix(line, "started") {
		t.Fatalf("sh said %q", line)
	}
	if got := ports(t, cmd.Process.Pid); len(got) != 0 {
		t.Errorf("sleep listens on %v", got)
	}
	self := l.Addr().(*net.TCPAddr).Port
	if got := ports(t, os.Getpid()); !slices.Contains(got, self) {
		t.Errorf("this process listens on %d, Ports says %v", self, got)
	}
}

// A pid that does not exist is skipped.
func TestGonePid(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got := ports(t, cmd.Process.Pid); len(got) != 0 {
		t.Errorf("a gone pid listens on %v", got)
	}
}

// BenchmarkPorts looks at one process that listens on two ports.
func BenchmarkPorts(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	pids := []int{cmd.Process.Pid}
	for b.Loop() {
		if p, err := Ports(pids); err != nil || len(p) == 0 {
			b.Fatal(p, err)
		}
	}
}

// sock_diag lists this process's listeners, IPv4 and IPv6, by inode; were
// it broken, Ports would fall back to /proc quietly.
func TestDiagListeners(t *testing.T) {
	t.Parallel()
	if _, err := diagListeners(); err != nil {
		t.Skipf("sock_diag not allowed here: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v", addr, err)
			continue
		}
		defer l.Close()
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		err = syscall.Fstat(int(f.Fd()), &st)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		byInode, err := diagListeners()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := byInode[st.Ino], l.Addr().(*net.TCPAddr).Port; got != want {
			t.Errorf("%s: sock_diag says port %d for inode %d, want %d", addr, got, st.Ino, want)
		}
	}
}
