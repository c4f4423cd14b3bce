package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/sandboxd"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// measureP16 is the round trip of Execute of `true` over gRPC, through conch
// sandboxd's ProcessService as the daemon serves it (processes started
// through the API server), against conch's own one-shot run of `true`
// (POST /v1/processes/run) on the same daemon. Both run the program
// without a shell.
func measureP16(ctx context.Context, cfg config) Row {
	d, err := startDaemon()
	if err != nil {
		return failed(err)
	}
	defer d.stop()
	root, err := os.MkdirTemp("", "conch-bench-sandboxd-")
	if err != nil {
		return failed(err)
	}
	defer os.RemoveAll(root)
	sbx, err := sandboxd.New(sandboxd.Options{Root: root, Start: d.srv.StartExec})
	if err != nil {
		return failed(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return failed(err)
	}
	g := grpc.NewServer()
	sbx.RegisterGRPC(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sbx.Shutdown(sctx)
		g.Stop()
		<-served
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return failed(err)
	}
	defer conn.Close()
	pc := sandboxdpb.NewProcessServiceClient(conn)
	execute := func() error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := pc.Execute(ctx, &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"true"}}})
		if err != nil {
			return err
		}
		if resp.GetExitCode() != 0 {
			return fmt.Errorf("true exited %d", resp.GetExitCode())
		}
		return nil
	}
	oneShot := func() error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return runResultOK(d.c.Run(ctx, client.RunOptions{
			StartOptions: client.StartOptions{Argv: []string{"true"}, KeepLogs: "none"},
			Timeout:      client.Millis(20 * time.Second),
		}))
	}
	v, base, err := alternate(cfg.reps, execute, oneShot)
	if err != nil {
		return failed(err)
	}
	return latencyRow(v, base, 1.1, "≤ 1.1×")
}
