package main

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// The gRPC server bounds the calls in flight on one connection, and says
// so in its SETTINGS, which is what a client keeps to: it bounded none, and
// one connection opened 20,000 Start streams that sent no request, each
// held as long as the connection.
func TestSandboxdGRPCBoundsStreams(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g, _ := newSandboxdGRPC(newRequestWaits(sandboxdRequestTimeout, sandboxdMaxWaitingCalls))
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	defer func() {
		g.Stop()
		require.NoError(t, <-served)
	}()

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second))) // a hang guard
	_, err = conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	for {
		f, err := fr.ReadFrame()
		require.NoError(t, err)
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		n, ok := sf.Value(http2.SettingMaxConcurrentStreams)
		require.True(t, ok, "the server's SETTINGS announce no MAX_CONCURRENT_STREAMS")
		require.Equal(t, uint32(sandboxdMaxStreams), n)
		return
	}
}
