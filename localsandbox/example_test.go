package localsandbox_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/conchsh/conch/localsandbox"
)

// A harness creates a session on its checkout, binds its bridge to the
// leased port, hands the restricted view to the agent's tools, and stops the
// session when the task is done.
func Example() {
	dir, err := os.MkdirTemp("", "checkout")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	sandbox, err := localsandbox.New(dir, localsandbox.WithEnv(map[string]string{"NO_COLOR": "1"}))
	if err != nil {
		log.Fatal(err)
	}
	defer sandbox.Stop() // ends everything started below that still runs

	// The bridge binds the leased port; the endpoint is what clients dial.
	port := sandbox.Ports()[0]
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		log.Fatal(err)
	}
	bridge := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "bridge up")
	})}
	go bridge.Serve(ln)
	defer bridge.Close()
	url, _ := sandbox.PortEndpoint(port, "http")
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Run waits; a failing command is a result, not an error.
	res, err := sandbox.Run(ctx, localsandbox.RunOptions{
		Command: `echo "hello $WHO"; echo oops >&2; exit 3`,
		Env:     map[string]string{"WHO": "agent"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d, stdout %q, stderr %q\n", res.ExitCode, res.Stdout, res.Stderr)

	// The agent's tools get the restricted view: commands and files, no
	// Stop, no ports.
	tools := sandbox.Restricted()
	if err := tools.WriteTextFile("notes/todo.txt", "write tests\n"); err != nil {
		log.Fatal(err)
	}
	if _, ok, _ := tools.ReadTextFile("notes/missing.txt"); !ok {
		fmt.Println("missing.txt is absent")
	}

	// Spawn returns at once; output streams while the command runs.
	server, err := tools.Spawn(ctx, localsandbox.RunOptions{Command: "cat notes/todo.txt; sleep 60"})
	if err != nil {
		log.Fatal(err)
	}
	line, _ := bufio.NewReader(server.Stdout()).ReadString('\n')
	fmt.Print(line)
	server.Kill()
	code, _ := server.Wait(ctx)
	fmt.Println("killed:", code)

	// Output:
	// bridge up
	// exit 3, stdout "hello agent\n", stderr "oops\n"
	// missing.txt is absent
	// write tests
	// killed: 143
}
