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
	quick bool
	reps  int           // repetitions of a round-trip figure and of its baseline
	slow  int           // repetitions of a figure that takes tens of milliseconds
	bytes int64         // output size for P4 and P5
	many  int           // concurrent sessions for P6
	each  int           // commands per session for P6
	soak  time.Duration // how long P15 runs; zero leaves it out
}

// Row is one line of the table.
type Row struct {
	Metric   string  `json:"metric"`
	What     string  `json:"what"`
	Value    string  `json:"value"`
	Baseline string  `json:"baseline"`
	Ratio    float64 `json:"ratio,omitempty"`
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
}

var figures = []figure{
	{"P0", "bare bash round trip over a pipe", measureP0},
	{"P1", "session round trip of true, Go API (median; p99)", measureP1},
	{"P9", "session creation until the first command can run", measureP9},
	{"P3", "one-shot true over HTTP", measureP3},
	{"P2", "session round trip of true over HTTP", measureP2},
	{"P4", "session output throughput into the log store", measureP4},
	{"P5", "daemon peak RSS growth while P4 runs", measureP5},
	{"P5b", "daemon peak RSS growth: 8 concurrent run answers of 128 MiB commands over HTTP", measureP5b},
	{"P6", "concurrent sessions: commands per second", measureP6},
	{"P7", "idle daemon memory per session", measureP7},
	{"P8", "50 followers streaming one session command's output", measureP8},
	{"P10", "time until a run answers 202 waiting for input (bash read, python3 input())", measureP10},
	{"P11", "code cell round trip of pass, Python, Go API", measureP11},
	{"P15", "soak: sessions, processes and code contexts in a loop", measureSoak},
	{"P14", "P1 in a session with a cgroup of its own, against P1 without", measureP14},
	{"P14b", "P9 with a cgroup of its own, against P9 without", measureP14b},
	{"P16", "sandboxd Execute of true over gRPC, against conch's one-shot run over HTTP", measureP16},
}

func main() {
	quick := flag.Bool("quick", false, "fewer repetitions and smaller outputs: the whole run stays under two minutes")
	jsonOut := flag.String("json", "", "also write the report as JSON to `file` (- for stdout)")
	only := flag.String("only", "", "measure only these `figures`, comma-separated (P1,P3)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	soak := flag.Duration("soak", 0, "run only P15, the soak, for this `duration` (10m for the table's figure)")
	idleChild := flag.Bool("idle-child", false, "internal: measure P7 in this fresh process and print its row as JSON")
	flag.Parse()

	cfg := config{quick: *quick, reps: 1000, slow: 100, bytes: 1 << 30, many: 256, each: 50}
	if *quick {
		cfg = config{quick: true, reps: 200, slow: 30, bytes: 256 << 20, many: 64, each: 20}
	}
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
	ctx := context.Background()
	for _, f := range figures {
		if len(want) > 0 && !want[strings.ToUpper(f.name)] || f.name == "P15" && cfg.soak == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s %s...\n", f.name, f.what)
		t := time.Now()
		row := f.run(ctx, cfg)
		row.Metric, row.What = f.name, f.what
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
	fmt.Fprintln(tw, "metric\tvalue\tbaseline\tratio\ttarget\tmet\t")
	for _, r := range rep.Rows {
		ratio := "-"
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f×", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Metric, r.Value, r.Baseline, ratio, r.Target, r.Met)
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
