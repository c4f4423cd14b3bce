// Command bench measures conch's end-to-end performance figures (P0–P11 and P5b
// of docs/performance.md) against real shells and an in-process daemon. Each figure
// is measured alternately with its baseline in the same run, and reported as
// a ratio to it.
//
//	go run ./bench [-quick] [-json file] [-only P1,P3]
//	go run ./bench -soak 10m
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// config is what every measurement reads: the repetitions and sizes, which
// depend on -quick.
type config struct {
	quick        bool
	reps         int           // repetitions of a round-trip figure and of its baseline
	slow         int           // repetitions of a figure that takes tens of milliseconds
	bytes        int64         // output size for P5
	turnBytes    int64         // P4: output of each turn
	pairs        int           // repetitions of a throughput figure and its baseline (P4, P6)
	outputTurns  int           // P4: turns of each side a repetition
	commandTurns int           // P6: turns of each side a repetition, each of cfg.each commands a session
	many         int           // concurrent sessions for P6
	each         int           // commands per session for P6
	alone        int           // commands of P6's single session, per repetition
	soak         time.Duration // how long P15 runs; zero leaves it out
	// cpuProfile is -cpuprofile: a figure measured in a fresh process
	// profiles that process into cpuProfile.FIGURE.
	cpuProfile string
	// heapProfile is -heapprofile: the soak writes what is live when its
	// last sample is taken, the daemon still up, to heapProfile.
	heapProfile string
}

// Row is one line of the table.
type Row struct {
	Metric   string  `json:"metric"`
	What     string  `json:"what"`
	Value    string  `json:"value"`
	Baseline string  `json:"baseline"`
	Ratio    float64 `json:"ratio,omitempty"`
	Spread   string  `json:"spread,omitempty"` // how much value, baseline and ratio moved between repetitions
	Target   string  `json:"target"`
	Met      string  `json:"met"`
	Note     string  `json:"note,omitempty"`
}

// Report is the whole run, as -json writes it.
type Report struct {
	Time    time.Time         `json:"time"`
	Quick   bool              `json:"quick"`
	Cores   int               `json:"cores"`
	Go      string            `json:"go"`
	OS      string            `json:"os"`
	Shells  map[string]string `json:"shells"`
	Rows    []Row             `json:"rows"`
	Elapsed string            `json:"elapsed"`
}

// figure is one measured metric.
type figure struct {
	name string
	what string
	run  func(ctx context.Context, cfg config) Row
	// fresh figures are measured in a new process of this program, so
	// that what the figures before them left in this one (a large heap
	// and the GC's pace, the scavenger returning it, idle connections and
	// their goroutines) does not move them.
	fresh bool
}

var figures = []figure{
	{name: "P0", what: "bare bash round trip over a pipe", run: measureP0},
	{name: "P1", what: "session round trip of true, Go API (median; p99)", run: measureP1},
	{name: "P9", what: "session creation until the first command can run", run: measureP9},
	{name: "P3", what: "one-shot true over HTTP", run: measureP3},
	{name: "P2", what: "session round trip of true over HTTP", run: measureP2},
	{name: "P4", what: "session output throughput into the log store", run: measureP4, fresh: true},
	{name: "P5", what: "daemon peak RSS growth while P4 runs", run: measureP5},
	{name: "P5b", what: "daemon peak RSS growth: 8 concurrent run answers of 128 MiB commands over HTTP", run: measureP5b},
	{name: "P6", what: "concurrent sessions: commands per second", run: measureP6, fresh: true},
	{name: "P7", what: "idle daemon memory per session", run: measureP7},
	{name: "P8", what: "50 followers streaming one session command's output", run: measureP8},
	{name: "P10", what: "time until a run answers 202 waiting for input (bash read, python3 input())", run: measureP10},
	{name: "P11", what: "code cell round trip of pass, Python, Go API", run: measureP11},
	{name: "P15", what: "soak: sessions, processes and code contexts in a loop", run: measureSoak},
	{name: "P14", what: "P1 in a session with a cgroup of its own, against P1 without", run: measureP14},
	{name: "P14b", what: "P9 with a cgroup of its own, against P9 without", run: measureP14b},
	{name: "P16", what: "sandboxd Execute of true over gRPC, against conch's one-shot run over HTTP", run: measureP16},
}

func main() {
	quick := flag.Bool("quick", false, "fewer repetitions and smaller outputs: the whole run stays under two minutes")
	jsonOut := flag.String("json", "", "also write the report as JSON to `file` (- for stdout)")
	only := flag.String("only", "", "measure only these `figures`, comma-separated (P1,P3)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	soak := flag.Duration("soak", 0, "run only P15, the soak, for this `duration` (10m for the table's figure)")
	heapProfile := flag.String("heapprofile", "", "with -soak: write a heap profile of what is live at its end to `file`")
	idleChild := flag.Bool("idle-child", false, "internal: measure P7 in this fresh process and print its row as JSON")
	freshChild := flag.String("fresh-child", "", "internal: measure this `figure` in this fresh process and print its row as JSON")
	flag.Parse()
	if *heapProfile == "" {
		// As in conch serve, which links no reader of the memory profile,
		// so that its runtime never samples allocations: this program
		// links one (runtime/pprof), and the profiler's table of the
		// stacks it sampled grew through a soak (300 KiB in its first
		// four minutes), memory the daemon does not spend.
		runtime.MemProfileRate = 0
	}

	cfg := config{quick: *quick, reps: 1000, slow: 100, bytes: 1 << 30, turnBytes: 32 << 20, pairs: 7, outputTurns: 64, commandTurns: 3, many: 256, each: 50, alone: 2000}
	if *quick {
		cfg = config{quick: true, reps: 200, slow: 30, bytes: 512 << 20, turnBytes: 32 << 20, pairs: 5, outputTurns: 16, commandTurns: 2, many: 64, each: 20, alone: 600}
	}
	cfg.cpuProfile, cfg.heapProfile = *cpuProfile, *heapProfile
	if *soak > 0 {
		cfg.soak = *soak
		*only = "P15"
	}
	if *idleChild {
		if err := json.NewEncoder(os.Stdout).Encode(measureIdle(context.Background(), cfg)); err != nil {
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
	}
	if *freshChild != "" {
		i := slices.IndexFunc(figures, func(f figure) bool { return f.name == *freshChild })
		if i < 0 {
			fmt.Fprintf(os.Stderr, "bench: -fresh-child: no figure %s\n", *freshChild)
			os.Exit(2)
		}
		f := figures[i]
		f.fresh = false
		row := measure(context.Background(), cfg, f)
		pprof.StopCPUProfile()
		if err := json.NewEncoder(os.Stdout).Encode(row); err != nil {
			os.Exit(1)
		}
		return
	}
	want := map[string]bool{}
	for _, f := range strings.Split(*only, ",") {
		if f = strings.ToUpper(strings.TrimSpace(f)); f != "" {
			want[f] = true
		}
	}
	for f := range want {
		if !slices.ContainsFunc(figures, func(g figure) bool { return strings.ToUpper(g.name) == f }) {
			fmt.Fprintf(os.Stderr, "bench: -only: no figure %s\n", f)
			os.Exit(2)
		}
	}

	start := time.Now()
	rep := Report{
		Time: start.UTC(), Quick: cfg.quick, Cores: runtime.NumCPU(),
		Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Shells: shellVersions(),
	}
	ctx := context.Background()
	for _, f := range figures {
		if len(want) > 0 && !want[strings.ToUpper(f.name)] || f.name == "P15" && cfg.soak == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s %s...\n", f.name, f.what)
		t := time.Now()
		row := measure(ctx, cfg, f)
		rep.Rows = append(rep.Rows, row)
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", f.name, time.Since(t).Round(time.Millisecond))
	}
	pprof.StopCPUProfile()
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()

	printTable(os.Stdout, rep)
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, rep); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
	}
}

// measure measures one figure, in this process or, for a fresh one, in a
// new process of this program started with -fresh-child. Its note ends
// with what the process held before it.
func measure(ctx context.Context, cfg config, f figure) Row {
	var row Row
	if f.fresh {
		row = measureFresh(ctx, cfg, f)
	} else {
		before := state()
		row = f.run(ctx, cfg)
		row.Note = strings.TrimPrefix(row.Note+"; before it: "+before, "; ")
	}
	row.Metric, row.What = f.name, f.what
	return row
}

// measureFresh measures f in a new process of this program, once this one
// has returned its free memory and the processes it started have gone.
func measureFresh(ctx context.Context, cfg config, f figure) Row {
	self, err := os.Executable()
	if err != nil {
		return failed(err)
	}
	left := settle(ctx)
	args := []string{"-fresh-child", f.name}
	if cfg.quick {
		args = append(args, "-quick")
	}
	if cfg.cpuProfile != "" {
		args = append(args, "-cpuprofile", cfg.cpuProfile+"."+f.name)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return failed(fmt.Errorf("%s in a fresh process: %w", f.name, err))
	}
	var row Row
	if err := json.Unmarshal(out, &row); err != nil {
		return failed(fmt.Errorf("%s in a fresh process: %w", f.name, err))
	}
	row.Note += " (in a process of its own)"
	if len(left) > 0 {
		row.Note += "; still running from earlier figures: " + strings.Join(left, ", ")
	}
	return row
}

func writeJSON(path string, rep Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func printTable(w io.Writer, rep Report) {
	fmt.Fprintf(w, "conch bench  %s  quick=%v  elapsed %s\n", rep.Time.Format(time.RFC3339), rep.Quick, rep.Elapsed)
	fmt.Fprintf(w, "machine: %d cores, %s, %s\n", rep.Cores, rep.Go, rep.OS)
	names := make([]string, 0, len(rep.Shells))
	for n := range rep.Shells {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, rep.Shells[n])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tvalue\tbaseline\tratio\ttarget\tmet\tspread\t")
	for _, r := range rep.Rows {
		ratio := "-"
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f×", r.Ratio)
		}
		spread := r.Spread
		if spread == "" {
			spread = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Metric, r.Value, r.Baseline, ratio, r.Target, r.Met, spread)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "%s  %s", r.Metric, r.What)
		if r.Note != "" {
			fmt.Fprintf(w, ": %s", r.Note)
		}
		fmt.Fprintln(w)
	}
}

// shellVersions reports the first line of each installed shell's version.
func shellVersions() map[string]string {
	out := map[string]string{}
	probe := map[string][]string{
		"bash":    {"bash", "-c", "echo $BASH_VERSION"},
		"zsh":     {"zsh", "-c", "echo $ZSH_VERSION"},
		"ksh93":   {"ksh93", "-c", "echo ${.sh.version}"},
		"mksh":    {"mksh", "-c", "echo $KSH_VERSION"},
		"dash":    {"sh", "-c", "dpkg-query -W -f '${Version}' dash 2>/dev/null || echo installed"},
		"busybox": {"sh", "-c", "busybox 2>&1 | head -1"},
	}
	for name, argv := range probe {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
		cancel()
		v := strings.TrimSpace(string(b))
		if err != nil || v == "" {
			v = "not found"
		}
		out[name] = v
	}
	return out
}
