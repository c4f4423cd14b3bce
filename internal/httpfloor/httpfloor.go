// Package httpfloor measures the floor of the daemon's HTTP path: net/http
// and nothing else around the same work a request does. A handler that
// reads the body, runs the work on its goroutine (as the daemon runs a
// session command on the request's) and writes a fixed answer, reached
// over loopback TCP by a client that writes a request made once and reads
// the answer with http.ReadResponse on one kept connection. No daemon
// served by net/http can answer the same request for less.
package httpfloor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// answer is about the size of a session command's answer for `true`.
const answer = `{"reason":"exited","exitCode":0,"cwd":"/","processId":"00000000-0000-0000-0000-000000000000","output":"","stdout":"","stderr":""}`

// Floor is a bare net/http server around some work, and its client.
type Floor struct {
	hs     *http.Server
	served chan struct{}
	conn   net.Conn
	br     *bufio.Reader
	req    []byte
	failed atomic.Pointer[error] // what the work returned last, if it failed
}

// Serve starts serving work on a loopback port.
func Serve(work func() error) (*Floor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Floor{served: make(chan struct{})}
	f.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		if err := work(); err != nil {
			f.failed.Store(&err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})}
	go func() {
		defer close(f.served)
		f.hs.Serve(ln)
	}()
	if f.conn, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		f.Close()
		return nil, err
	}
	f.br = bufio.NewReader(f.conn)
	const body = `{"cmd":"true"}`
	f.req = fmt.Appendf(nil, "POST /run HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		ln.Addr(), len(body), body)
	return f, nil
}

// RoundTrip sends the request and reads the answer.
func (f *Floor) RoundTrip() error {
	if _, err := f.conn.Write(f.req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(f.br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("bare net/http answered %s", resp.Status)
		if failed := f.failed.Load(); failed != nil {
			err = errors.Join(err, *failed)
		}
		return err
	}
	return err
}

// Close stops the server and waits for it.
func (f *Floor) Close() {
	if f.conn != nil {
		f.conn.Close()
	}
	f.hs.Close()
	<-f.served
}
