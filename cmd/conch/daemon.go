package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/daemonrec"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/internal/statefile"
)

// childGrace is how long the processes a stopping daemon still finds under
// it get after TERM, and how long KILL is then repeated for.
const childGrace = 2 * time.Second

// daemon is what `conch serve` runs its server in: it is the subreaper and
// reaper of every process it starts, marks them with its instance
// (proctree.InstanceEnv) and records the instance in the state directory,
// so that a later daemon can end what this one leaves if it is killed.
type daemon struct {
	log        *slog.Logger
	contain    containment.Config // how the instance's Root is opened
	streamBase string             // where the instance's stream directory goes (--stream-dir); "" for resident.PrivateBase
	root       *containment.Root  // the cgroups of what it starts
	rec        instance
	recPath    string // where rec is written; removed once nothing is left
	stopReaper func()
	stopOnce   sync.Once
}

// instance is a daemon's record, in instances/ID.json (see daemonrec).
type instance struct {
	ID string `json:"id"`
	daemonrec.Process
	StreamDir string `json:"streamDir"` // holds the sessions' FIFO directories
	// Cgroups are the instance's cgroups, the v2 one first; each holds
	// one cgroup per session, process and context.
	Cgroups []string `json:"cgroups,omitempty"`
}

// liveDaemon returns the endpoint record of the state directory when the
// daemon it names runs (see daemonrec.Running): not merely a pid that a
// zombie or another program holds.
func liveDaemon(stateDir string) (client.Endpoint, bool) {
	ep, err := client.ReadEndpoint(stateDir)
	return ep, err == nil && daemonrec.Running(stateDir, ep.PID)
}

// hangUpIgnored is whether this process started with SIGHUP ignored, as
// under nohup: read at start, before the first start of a child handles it
// (proctree.Start).
var hangUpIgnored = signal.Ignored(syscall.SIGHUP)

// catchStop starts catching stopSignals before the daemon starts
// anything: one that arrives while it starts (a supervisor stopping it at
// once) stops it once started, as one would later, rather than end it
// there and then with what it had begun left behind. A second one before
// started is called (a start stuck reading a --token-file FIFO nothing
// writes) ends the process at once, as the signal would have. The
// signals come on sig; release stops catching them.
func catchStop() (sig <-chan os.Signal, started, release func()) {
	caught := make(chan os.Signal, 2)
	signal.Notify(caught, stopSignals()...)
	out := make(chan os.Signal, 2)
	up, done := make(chan struct{}), make(chan struct{})
	go func() {
		early := 0
		for {
			select {
			case s := <-caught:
				select {
				case <-up:
				default:
					if early++; early == 2 {
						os.Exit(128 + int(s.(syscall.Signal)))
					}
				}
				select {
				case out <- s:
				default: // two are waiting already: one more says nothing new
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(up) }) }, func() {
		signal.Stop(caught)
		close(done)
	}
}

// stopSignals are the signals that stop a daemon as SIGTERM does: SIGTERM,
// SIGINT, and SIGHUP — the terminal it runs on closed, whose default would
// end it at once and leave every process it started running — unless it
// was started with SIGHUP ignored.
func stopSignals() []os.Signal {
	if hangUpIgnored {
		return []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	}
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}
}

// startDaemon makes this process the subreaper of what it starts and starts
// the reaper, ends what dead daemons of the same state directory left, and
// records this instance.
func startDaemon(logger *slog.Logger, stateDir, streamDir string, contain containment.Config) (*daemon, error) {
	// A log reader that goes away fails the daemon's writes to stderr
	// rather than ending it.
	proctree.SurviveBrokenPipe()
	// Orphans of the processes the daemon starts are reparented to it, so
	// that it can find them (to end them) and reap them.
	if err := proctree.EnableSubreaper(); err != nil {
		logger.Warn("become a subreaper", "err", err)
	}
	// When memory runs out, the OOM killer picks a command, not the daemon.
	if err := containment.ProtectSelf(); err != nil {
		logger.Info("the daemon's OOM score stays", "err", err)
	}
	// Before anything runs: the threads are made while there is room.
	reserveDaemonThreads(logger)
	stopReaper, err := proctree.StartReaper()
	if err != nil {
		return nil, err
	}
	d := &daemon{log: logger, stopReaper: stopReaper, contain: contain, streamBase: streamDir}
	if err := d.record(stateDir); err != nil {
		stopReaper()
		return nil, err
	}
	return d, nil
}

// record clears the leftovers of dead instances, then marks and records
// this one.
func (d *daemon) record(stateDir string) error {
	dir := filepath.Join(stateDir, daemonrec.Dir)
	if err := statefile.MakeDir(stateDir); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := statefile.MakeDir(dir); err != nil {
		return fmt.Errorf("instance records: %w", err)
	}
	d.clearDead(stateDir, dir)
	base, named := d.streamBase, d.streamBase != ""
	if named {
		// A directory the user chose, made when missing: its own
		// permissions are the user's to set.
		if err := os.MkdirAll(base, 0o700); err != nil {
			return fmt.Errorf("--stream-dir: %w", err)
		}
	} else {
		// /dev/shm when it can, out of the way of commands that clean /tmp.
		base = resident.PrivateBase()
	}
	id, streams, err := makeStreamDir(base)
	fallback := !named && base != os.TempDir()
	if err == nil && fallback {
		// A tmpfs with no byte free still makes the directory (and the
		// sessions' FIFOs, which take none), but not a code context's
		// driver, for the life of the daemon: full of bytes is full too.
		if err = writeProbe(streams); err != nil {
			os.RemoveAll(streams)
		}
	}
	if (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && fallback {
		// /dev/shm is full (commands fill it too): the temp directory
		// serves, as when /dev/shm is not writable.
		d.log.Warn("no room in "+base+": the stream directory goes in the temp directory", "err", err)
		id, streams, err = makeStreamDir(os.TempDir())
	}
	if err != nil {
		return fmt.Errorf("stream directory: %w", err)
	}
	d.contain.Instance = id
	d.root = containment.Open(d.contain)
	if d.root.Mode() == containment.ModeNone {
		d.log.Warn("containment none: processes that leave a tree and clear its tag are found only as the daemon's children", "reason", d.root.Reason())
	}
	if err := d.root.Check(d.contain.Defaults); err != nil {
		_ = d.root.Destroy()
		os.RemoveAll(streams)
		return fmt.Errorf("--default-limits: %w", err)
	}
	d.rec = instance{ID: id, Process: daemonrec.Self(), StreamDir: streams, Cgroups: d.root.Dirs()}
	d.recPath = filepath.Join(dir, id+".json")
	b, _ := json.Marshal(d.rec)
	if err := statefile.Write(d.recPath, b); err != nil {
		_ = d.root.Destroy()
		os.RemoveAll(streams)
		return fmt.Errorf("instance record: %w", err)
	}
	// Every process started from now on inherits the mark.
	return os.Setenv(proctree.InstanceEnv, id)
}

// makeStreamDir gives the instance its id and makes its stream directory
// in base, named by the id's first 8 characters: every frame a session's
// shell is sent names its FIFOs by their paths, and zsh and mksh read a
// frame a byte per read call, so every byte of the name costs them a call
// at each path (named by the whole id, the directory cost a zsh command a
// third of its shell's CPU). Another id is drawn when the name is taken.
func makeStreamDir(base string) (id, dir string, err error) {
	for range 8 {
		id = uuid.NewString()
		dir = filepath.Join(base, streamDirName(id))
		if err = os.Mkdir(dir, 0o700); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	return id, dir, err
}

// writeProbe writes a file of one byte in dir, and removes it: whether it
// could be written says whether dir has room for a file with bytes in it.
func writeProbe(dir string) error {
	probe := filepath.Join(dir, "room")
	err := os.WriteFile(probe, []byte{0}, 0o600)
	if rmErr := os.Remove(probe); err == nil && rmErr != nil {
		err = rmErr
	}
	return err
}

// streamDirName is the name of the stream directory of the instance id.
func streamDirName(id string) string { return "conch-" + id[:8] }

// ownStreamDir reports whether rec's stream directory is named as its
// instance's: by its id as it is now, or as daemons before named it (by the
// whole id). A record naming any other directory never has it removed.
func ownStreamDir(rec instance) bool {
	name := filepath.Base(rec.StreamDir)
	return rec.StreamDir != "" && len(rec.ID) >= 8 && (name == streamDirName(rec.ID) || name == "conch-"+rec.ID)
}

// removeStreamDirs removes an instance's stream directory dir, and those
// its sessions made in its place (dir-N, see resident.Dir) when what was
// at its name was not the daemon's: another user's directory, made there
// after a command removed the daemon's, or a symbolic link. Each goes only
// if it is still a directory as the daemon made it: another user's, and
// what is in it, is never removed, nor a link followed. It returns why dir
// was not removed.
func removeStreamDirs(dir string) error {
	made, _ := filepath.Glob(dir + "-*")
	for _, m := range made {
		n := strings.TrimPrefix(m, dir+"-")
		if _, err := strconv.ParseUint(n, 10, 32); err == nil { // os.MkdirTemp's
			resident.RemoveOwn(m)
		}
	}
	return resident.RemoveOwn(dir)
}

// clearDead ends what every dead instance recorded in dir left: processes
// carrying its mark, its stream directory, its endpoint record, and the
// instance's record itself. Records of live instances are left alone.
func (d *daemon) clearDead(stateDir, dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var dead []instance
	live := map[int]bool{}
	for _, p := range paths {
		var rec instance
		b, err := statefile.Read(p)
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if _, perr := uuid.Parse(rec.ID); err == nil && (perr != nil || rec.ID+".json" != filepath.Base(p)) {
			err = errors.New("the id does not name the file")
		}
		if err != nil {
			d.log.Warn("unreadable instance record left alone", "path", p, "err", err)
			continue
		}
		// Another pid namespace's pids cannot be checked from here.
		if rec.Unseen() {
			d.log.Info("instance record of another pid namespace left alone", "path", p)
			continue
		}
		if rec.Alive() {
			live[rec.PID] = true
		} else {
			dead = append(dead, rec)
		}
	}
	for _, rec := range dead {
		if d.clearInstance(rec) {
			_ = os.Remove(filepath.Join(dir, rec.ID+".json"))
		}
		if ep, err := client.ReadEndpoint(stateDir); err == nil && ep.PID == rec.PID && !live[ep.PID] {
			_ = os.Remove(filepath.Join(stateDir, client.EndpointFile))
			d.log.Warn("removed the endpoint record of a dead daemon", "pid", rec.PID)
		}
	}
	d.clearTemps(dir)
}

// clearTemps removes the temporary records (ID.json.tmp) that starts which
// failed as they wrote their record left, before such a start removed its
// own. One whole record is removed once its daemon is dead; one that is not
// whole (a write that found no room left it empty) names no daemon, and is
// removed once it is older than tempRecordAge: a daemon that is starting
// (conch mcp takes no lock) renames its own within moments.
func (d *daemon) clearTemps(dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json.tmp"))
	for _, p := range paths {
		var rec instance
		b, err := statefile.Read(p)
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err == nil && rec.ID+".json.tmp" == filepath.Base(p) {
			// Another pid namespace's pids cannot be checked from here,
			// as in clearDead.
			if rec.Unseen() || rec.Alive() {
				continue
			}
		} else if fi, serr := os.Stat(p); serr != nil || time.Since(fi.ModTime()) < tempRecordAge {
			continue
		}
		if os.Remove(p) == nil {
			d.log.Info("removed the temporary record of a failed start", "path", p)
		}
	}
}

// tempRecordAge is how old a temporary record that names no daemon must be
// for clearTemps to remove it.
const tempRecordAge = time.Minute

// clearInstance kills what the dead instance rec left and removes its
// stream directory, and reports whether nothing of it is left.
func (d *daemon) clearInstance(rec instance) bool {
	// The cgroups first: they hold what cleared its mark as well.
	inCgroups, cerr := containment.Clear(rec.ID, rec.Cgroups)
	if cerr != nil {
		d.log.Warn("clear the cgroups of a dead daemon", "instance", rec.ID, "err", cerr)
	}
	n := len(proctree.Marked(rec.ID))
	left := endAll(func() []int { return proctree.Marked(rec.ID) }, func(sig syscall.Signal) {
		_ = proctree.SignalMarked(rec.ID, sig)
	}, 0)
	removed := false
	if ownStreamDir(rec) {
		removed = removeStreamDirs(rec.StreamDir) == nil
	}
	d.log.Warn("cleared what a dead daemon left", "instance", rec.ID, "pid", rec.PID,
		"killed", inCgroups+n, "left", left, "streamDir", rec.StreamDir, "streamDirRemoved", removed,
		"killedInCgroups", inCgroups, "cgroups", len(rec.Cgroups))
	return left == 0 && cerr == nil
}

// stop ends what is left under the daemon once the server has stopped:
// processes that escaped every tree (a `setsid env -i` child is found by
// nothing but its parent, the daemon) and anything still carrying its mark.
// It removes the stream directory, and the instance record unless
// processes outlived KILL, so that a later daemon tries again, and stops
// the reaper.
// Calling it again does nothing.
func (d *daemon) stop() { d.stopOnce.Do(d.end) }

func (d *daemon) end() {
	defer d.stopReaper()
	kids := func() []int {
		out := proctree.Marked(d.rec.ID)
		for _, p := range proctree.Children() {
			if proctree.Alive(p) {
				out = append(out, p)
			}
		}
		return out
	}
	if n := len(kids()); n > 0 {
		d.log.Info("ending processes left after every session and process ended", "count", n)
	}
	left := endAll(kids, func(sig syscall.Signal) {
		for _, p := range proctree.Children() {
			_ = proctree.Signal(p, sig, true)
		}
		_ = proctree.SignalMarked(d.rec.ID, sig)
	}, childGrace)
	// What is still in the instance's cgroups left every tree and cleared
	// its mark, or was not the daemon's child: cgroup.kill ends it.
	if err := d.root.Destroy(); err != nil {
		d.log.Warn("end the cgroups", "err", err)
		left++
	}
	// The reaper reaps what was just killed before it stops, rather than
	// leave zombies to init; a second at most.
	for i := 0; i < 50 && len(proctree.Children()) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if err := removeStreamDirs(d.rec.StreamDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("remove the stream directory", "err", err)
	}
	if left > 0 {
		d.log.Warn("processes outlived KILL; the next daemon will try again", "count", left)
		return
	}
	_ = os.Remove(d.recPath)
}

// endAll sends TERM through signal and, from grace on (at once when grace
// is zero), KILL again and again until find has found nothing twice in a
// row (a scan of /proc can miss processes that fork and exit as it reads),
// or for childGrace at most. It returns how many processes it last found.
func endAll(find func() []int, signal func(syscall.Signal), grace time.Duration) int {
	kill := time.Now().Add(grace)
	giveUp := kill.Add(childGrace)
	termed := false
	for clean := 0; clean < 2; {
		n := len(find())
		if n == 0 {
			clean++
			continue
		}
		clean = 0
		now := time.Now()
		switch {
		case now.After(giveUp):
			return n
		case !now.Before(kill):
			signal(syscall.SIGKILL)
		case !termed:
			signal(syscall.SIGTERM)
			termed = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}
