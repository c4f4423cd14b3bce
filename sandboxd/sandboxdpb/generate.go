// Package sandboxdpb is the Go code generated from process/v1/process.proto,
// the ProcessService of the agent-sandbox runtime API (sandboxd), which
// `conch sandboxd` serves. The .proto is kept unchanged under sandboxd/proto;
// its go_package is mapped here on the command line.
//
// Regenerate with `go generate ./sandboxd/sandboxdpb` (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc on PATH).
package sandboxdpb

//go:generate protoc -I ../proto --go_out=../.. --go_opt=module=github.com/conchsh/conch --go_opt=Mprocess/v1/process.proto=github.com/conchsh/conch/sandboxd/sandboxdpb;sandboxdpb --go-grpc_out=../.. --go-grpc_opt=module=github.com/conchsh/conch --go-grpc_opt=Mprocess/v1/process.proto=github.com/conchsh/conch/sandboxd/sandboxdpb;sandboxdpb process/v1/process.proto
