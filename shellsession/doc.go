// Package shellsession runs commands in long-lived shells.
//
// A [Session] owns one shell process — bash by default, or sh, dash, zsh, ksh,
// mksh or busybox sh — and a serial queue of [Command]s. Each command runs in
// the shell itself, so cd, export, functions, aliases, options, traps, umask
// and ulimit carry over to the next one, and each gets its own exact output,
// exit status and working directory (see package sentinel for how).
//
// The shell runs interactively (reading its commands from a pipe, not a
// terminal) because only an interactive shell aborts a whole command — a
// builtin loop, a function, a pipeline — on SIGINT and lives on; its prompts,
// traces of the engine's lines and job messages go to the shell's own stdout
// and stderr, which are not any command's. Text the shell could not parse
// never reaches it: it is checked first and refused with exit status 2.
package shellsession
