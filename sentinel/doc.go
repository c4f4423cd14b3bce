// Package sentinel frames a command for a long-lived shell so that the engine
// learns the command's end, exit status and working directory from the shell
// itself, and splits the command's output streams at the markers the frame
// makes the shell write.
//
// A frame has the shell run the command's text in the shell itself — a
// sourced file, or an eval at the shell's top level, never a subshell or a
// function, so every change it makes to the shell's state stays — with its
// stdin, stdout and stderr redirected to per-command files (FIFOs the engine
// reads).
// An end line then writes an end marker on the command's stdout, with the
// exit status, the shell's option letters and the directory. Its stderr
// needs none: the shell has written all of the command's stderr, and closed
// the stream, before it runs the end line, so what the stream holds once
// the stdout marker is read is the whole of it. Markers carry a random nonce fresh for
// every command: output that imitates a marker (another session's log, a
// marker printed before) cannot end a command early, because it does not
// hold this command's nonce. The nonce is no secret from the command
// itself: a shell command finds it in its shell's variables, a cell that
// goes looking in its interpreter, and one that prints its own marker
// whole is reported ended there (see the README).
package sentinel
