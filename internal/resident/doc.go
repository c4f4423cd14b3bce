// Package resident is what a shell session and a code context share: one
// long-lived interpreter process — a shell, or a language's runtime running
// conch's driver — that stands for the session as its process.Process, ends
// the same way whichever kind it is, and keeps reading the streams of
// commands that ended while something they started still holds them.
//
// A Host owns the interpreter's process, its serial queue, its diagnostic
// output and its end; the embedding package owns what its commands are and
// how they are framed.
package resident
