// Package sandboxd serves the runtime API of kubernetes-sigs/agent-sandbox
// (KEP-539.2, "sandboxd") over conch's engine: the gRPC ProcessService
// (Start, Execute, WriteStdin, SendSignal, ResizeTTY, from
// sandboxd/proto/process/v1/process.proto) and the REST filesystem and
// runtime API (/v1/files/{path}, /v1/health, /v1/metadata).
//
// Every process is started through package exec, so it leads its own
// session and process group, carries conch's tag for its tree, and writes
// its output to a logstore.Log that the Start stream follows. Every path,
// a file's or a process's working directory, is resolved against the root
// with symlinks evaluated and refused when it ends outside the root; a
// file's is then opened, made or removed through an os.Root of the root,
// so that a symlink swapped onto it meanwhile is followed only while it
// stays beneath the root, and one that leads out fails the request rather
// than leading it outside (see beneath.go).
//
// A Server is created with New; RegisterGRPC and Handler attach it to a
// gRPC server and an HTTP server the caller runs, and Shutdown ends its
// processes. The daemon `conch sandboxd` does that.
package sandboxd
