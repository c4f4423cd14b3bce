package server_test

import (
	"testing"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
	"github.com/stretchr/testify/require"
)

func BenchmarkZZHTTPOnly(b *testing.B) {
	d := start(b, server.Options{})
	c := ctx(b)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(b, err)
	opts := client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true"}}
	for b.Loop() {
		r, _, err := d.c.RunCommand(c, s.ID, opts)
		if err != nil || r == nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("run true over HTTP: %v %+v", err, r)
		}
	}
}

func BenchmarkZZEmbeddedOnly(b *testing.B) {
	emb := benchSession(b)
	for b.Loop() {
		runTrue(b, emb)
	}
}
