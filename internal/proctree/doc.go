// Package proctree finds and signals process trees on Linux through /proc,
// and reaps the orphans a subreaper (or PID 1) inherits without stealing the
// exit status of the children it started itself.
//
// A tree is a process and its descendants, linked through the kernel's list
// of each thread's children (/proc/PID/task/TID/children), or on a kernel
// without those lists through the PPid field of every /proc/PID/stat;
// children that called setsid stay in it. A descendant whose
// parent dies is reparented to the nearest subreaper (see [EnableSubreaper])
// or to init and leaves the tree: to find such processes, start the tree with
// [Tag] in its environment and look them up with [Tagged]. [SignalTagged]
// also signals the groups of tagged processes. A daemon marks everything it
// starts with [InstanceEnv] the same way, to find it with [Marked] after it
// was killed.
//
// Reaping: once [StartReaper] runs, every zombie child of this process that
// is not owned is reaped on SIGCHLD. A child is owned when it was started
// with [Start]; its status is left for [Wait]. While the reaper runs, every
// child of this process must be started through [Start], or the reaper may
// reap it before os/exec's Wait does (which then fails with "no child
// processes").
//
// Everything here reads /proc without freezing the processes it reads about,
// so results are a best effort: a process can fork, exit or change its
// environment between two reads, and a pid can be reused. [Signal] repeats its
// look at the tree until it finds no new descendant to narrow the first window.
package proctree
