// Package codecontext runs code cells in long-lived interpreters: Python and
// JavaScript (Node).
//
// A [Context] is to an interpreter what a shellsession.Session is to a shell:
// one interpreter process, fed through a serial queue of [Cell]s, each with
// its own log, exit status and working directory, interrupted and timed out
// as a shell command is. State — variables, imports, functions, classes —
// carries over from cell to cell.
//
// The interpreter runs a driver, a file of the language's own (embedded in
// the binary and written to the context's private directory), that reads
// cells from a Unix socket. For each cell the engine makes two FIFOs, and
// the driver points the interpreter's fds 1 and 2 at them (and fd 0 at the
// cell's stdin), so child processes the cell starts write into its log;
// the language's own stdout and stderr write there only for the running
// cell and for threads or callbacks it started, so a thread or timer that
// outlives its cell writes nowhere. After the cell the driver writes an end
// marker with a random per-cell nonce on each FIFO, the stdout one with the
// exit status and the directory (see package sentinel), and points fds 0-2
// elsewhere; what children still write to the FIFOs is read and discarded
// until they close them.
package codecontext
