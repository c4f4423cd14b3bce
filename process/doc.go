// Package process holds what every process conch runs has in common — its
// kind, state, result and description — and the registry that lists them all,
// so that get, list, wait, kill, logs and delete work the same for one-shot
// processes, PTY processes, session shells and session commands.
package process
