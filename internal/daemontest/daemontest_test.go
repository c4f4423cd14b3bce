package daemontest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/daemontest"
	"github.com/conchsh/conch/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartServesWithToken checks that the client Start returns reaches the
// daemon with the token, and that a client with another token is refused.
func TestStartServesWithToken(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t, server.Options{})
	require.Equal(t, daemontest.Token, d.Token)
	_, err := d.Client.Sessions(t.Context())
	require.NoError(t, err)

	other, err := client.New(d.URL, "not-the-token")
	require.NoError(t, err)
	defer other.CloseIdleConnections()
	_, err = other.Sessions(t.Context())
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, client.CodeUnauthenticated, e.Code)
}
