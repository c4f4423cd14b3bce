package server_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// readUntil reads from r until the bytes read contain want.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, 1024)
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		require.NoError(t, err, "read so far: %q", got.String())
	}
	return got.String()
}

func TestAttach(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{
		Kind: process.KindPTY,
		Cmd:  `echo before; while read -r line; do [ "$line" = size ] && stty size; [ "$line" = bye ] && exit 5; echo "got:$line"; done`,
	})
	require.NoError(t, err)
	// Wait for the first output, so that attaching must replay it.
	require.Eventually(t, func() bool {
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		return err == nil && len(page.Items) > 0
	}, 10e9, 10e6)

	a, err := d.c.Attach(c, p.ID)
	require.NoError(t, err)
	defer a.Close()
	readUntil(t, a, "before")

	_, err = a.Write([]byte("hello\n"))
	require.NoError(t, err)
	readUntil(t, a, "got:hello")

	require.NoError(t, a.Resize(c, 91, 37))
	_, err = a.Write([]byte("size\n"))
	require.NoError(t, err)
	readUntil(t, a, "37 91")

	_, err = a.Write([]byte("bye\n"))
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, a)
	require.NoError(t, err, "the attachment ends cleanly with the process")
	r, _, err := d.c.Wait(c, p.ID, 0)
	require.NoError(t, err)
	require.Equal(t, 5, exitCode(t, *r))
}

func TestAttachRefused(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	r := d.run(t, client.StartOptions{Cmd: "true"})
	_, err := d.c.Attach(c, r.ProcessID)
	requireCode(t, err, client.CodeUnsupportedOperation)
	_, err = d.c.Attach(c, "no-such-id")
	requireCode(t, err, client.CodeNotFound)
	other, err := client.New(d.url, "wrong")
	require.NoError(t, err)
	_, err = other.Attach(c, r.ProcessID)
	requireCode(t, err, client.CodeUnauthenticated)
	other.CloseIdleConnections()
}
