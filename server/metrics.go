package server

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conchsh/conch/process"
)

// Every metric of the daemon is declared in this file, on a registry the
// server owns. Labels take values from fixed sets (kinds, states, reasons,
// route patterns, status codes, budget names), never ids, paths or
// command text, so that the number of series stays bounded whatever the
// clients do.

// The kinds of process as metrics count them: the API's kinds, with a
// session's own shell or interpreter (session) apart from its commands
// (command) and cells (cell).
var metricKinds = []string{"exec", "pty", "command", "cell", "session"}

// metricKind is the metric kind of a process.
func metricKind(i process.Info) string {
	switch {
	case i.Kind == process.KindSession && i.System:
		return "session"
	case i.Kind == process.KindSession:
		return "command"
	case i.Kind == process.KindCode:
		return "cell"
	}
	return string(i.Kind)
}

var processStates = []process.State{process.Starting, process.Running, process.Terminal}

// Descriptions of the metrics read when scraped (see collect).
var (
	sessionsDesc = prometheus.NewDesc("conch_sessions",
		"Sessions (shell sessions and code contexts) alive.", nil, nil)
	processesDesc = prometheus.NewDesc("conch_processes",
		"Processes the daemon keeps a record of, by kind and state.", []string{"kind", "state"}, nil)
	logRetainedDesc = prometheus.NewDesc("conch_log_retained_bytes",
		"Output bytes retained by every process's log together.", nil, nil)
	logEvictedDesc = prometheus.NewDesc("conch_log_evicted_bytes_total",
		"Output bytes dropped to keep the logs within the log budget.", nil, nil)
	budgetDesc = prometheus.NewDesc("conch_budget_bytes",
		"The limit of each budget, in bytes.", []string{"budget"}, nil)
	budgetUsedDesc = prometheus.NewDesc("conch_budget_used_bytes",
		"What each budget holds now, in bytes.", []string{"budget"}, nil)
	inputWaitingDesc = prometheus.NewDesc("conch_input_waiting",
		"Processes waiting for input on their stdin or terminal.", nil, nil)
	containmentDesc = prometheus.NewDesc("conch_containment",
		"1 for the way the daemon contains its processes.", []string{"mode"}, nil)
)

// metrics are the server's metrics: those counted as things happen, and a
// collector that reads the rest from the server when scraped.
type metrics struct {
	reg             *prometheus.Registry
	commands        *prometheus.CounterVec
	commandDuration *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_commands_total",
			Help: "Processes that ended (exec, pty, session commands, code cells), by kind and reason.",
		}, []string{"kind", "reason"}),
		commandDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conch_command_duration_seconds",
			Help:    "How long processes ran, from start to end, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5 ms to about 22 min
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conch_http_request_duration_seconds",
			Help:    "How long HTTP requests took to answer (streams: until they closed), by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
	m.reg.MustRegister(m.commands, m.commandDuration, m.requests, m.requestDuration,
		stateCollector{s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// processEnded counts a process that ended. Sessions are not commands: they
// are counted alive by conch_sessions.
func (m *metrics) processEnded(i process.Info) {
	kind := metricKind(i)
	if kind == "session" || i.Result == nil {
		return
	}
	m.commands.WithLabelValues(kind, string(i.Result.Reason)).Inc()
	start := i.StartedAt
	if start.IsZero() {
		start = i.CreatedAt
	}
	if !i.ExitedAt.IsZero() && !start.IsZero() {
		m.commandDuration.WithLabelValues(kind).Observe(i.ExitedAt.Sub(start).Seconds())
	}
}

// routeMetrics are one route's series of the request metrics, each looked
// up once: a lookup by label values checks and hashes them, on every
// request (with the code formatted), 2-4 µs on a one-shot's path after a
// fork. A series is made when its first request is counted, as before.
type routeMetrics struct {
	m        *metrics
	route    string
	duration func() prometheus.Observer
	byCode   sync.Map // status → prometheus.Counter
}

// forRoute returns route's request metrics.
func (m *metrics) forRoute(route string) *routeMetrics {
	return &routeMetrics{m: m, route: route, duration: sync.OnceValue(func() prometheus.Observer {
		return m.requestDuration.WithLabelValues(route)
	})}
}

// request counts a request answered with status (see answered).
func (r *routeMetrics) request(status int, d time.Duration) {
	c, ok := r.byCode.Load(status)
	if !ok {
		c, _ = r.byCode.LoadOrStore(status, r.m.requests.WithLabelValues(r.route, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
	r.duration().Observe(d.Seconds())
}

// statusClientGone is the code a request whose client went away before
// its answer is counted and logged under, as proxies count it (nginx's 499).
const statusClientGone = 499

// answered is the status a request is counted and logged under, given the
// one its answer was written with: 0, nothing was answered, is the client
// gone first.
func answered(status int) int {
	if status == 0 {
		return statusClientGone
	}
	return status
}

// snake is a budget's name as a label value: endedRecordText is
// ended_record_text, as Prometheus labels are written.
func snake(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// stateCollector reads the gauges from the server when scraped.
type stateCollector struct{ s *Server }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, processesDesc, logRetainedDesc, logEvictedDesc,
		budgetDesc, budgetUsedDesc, inputWaitingDesc, containmentDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.settleEnded(slotSession) // a session whose end a client may have seen is not counted
	s.mu.Lock()
	sessions := s.active[slotSession]
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(sessions))

	counts := make(map[[2]string]int)
	for _, p := range s.reg.All() {
		i := p.Info()
		counts[[2]string{metricKind(i), string(i.State)}]++
	}
	for _, k := range metricKinds {
		for _, st := range processStates {
			n := counts[[2]string{k, string(st)}]
			ch <- prometheus.MustNewConstMetric(processesDesc, prometheus.GaugeValue, float64(n), k, string(st))
		}
	}

	ch <- prometheus.MustNewConstMetric(logRetainedDesc, prometheus.GaugeValue, float64(s.budget.Retained()))
	ch <- prometheus.MustNewConstMetric(logEvictedDesc, prometheus.CounterValue, float64(s.budget.Evicted()))
	for _, b := range s.Budgets() {
		if b.Unit != "bytes" {
			continue // conch_budget_bytes holds bytes; the ended records' count is in /healthz
		}
		name := snake(b.Name)
		ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, float64(b.Limit), name)
		ch <- prometheus.MustNewConstMetric(budgetUsedDesc, prometheus.GaugeValue, float64(b.Used), name)
	}

	waiting := 0
	s.inputs.Range(func(_, w any) bool {
		if w.(interface{ Waiting() bool }).Waiting() {
			waiting++
		}
		return true
	})
	ch <- prometheus.MustNewConstMetric(inputWaitingDesc, prometheus.GaugeValue, float64(waiting))

	ch <- prometheus.MustNewConstMetric(containmentDesc, prometheus.GaugeValue, 1, string(s.opts.Containment.Mode()))
}

// serveMetrics answers the metrics in the Prometheus text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

// MetricsRegistry returns the registry of the server's metrics, for a
// surface served beside the API to add its own.
func (s *Server) MetricsRegistry() *prometheus.Registry { return s.metrics.reg }

// metricsMux is what ServeMetrics serves: the metrics and the probes,
// without a token.
func (s *Server) metricsMux() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range []route{
		{"GET /metrics", s.serveMetrics, true, nil, false},
		{"GET /livez", s.livez, true, nil, false},
		{"GET /readyz", s.readyz, true, nil, false},
	} {
		mux.Handle(rt.pattern, s.wrap(rt))
	}
	none := s.wrap(route{pattern: "/", handler: noRoute(mux), public: true})
	mux.Handle("/", none)
	return closeProbes(cleanPaths(mux, none))
}

// metricsMaxConnections bounds the metrics listener's connections open at
// once: a scraper or two and the probes need a few each. One past it
// closes the connection idle longest (see idleConns).
const metricsMaxConnections = 16

// metricsIdleTimeout is how long the metrics listener keeps an idle
// connection, and waits for the headers of a request, the first one
// included: a scraper's next scrape, 15 s or more later, opens another,
// and a connection forgotten open gives its place back soon.
const metricsIdleTimeout = 5 * time.Second

// metricsWriteTimeout bounds the metrics listener's answer, from its
// request's headers read to its last byte written: a client that does not
// read its answer, a connection stuck otherwise, is closed then (and one
// stuck writing can give its place sooner, see stuckWrite). A scrape's
// own timeout is 10 s by default.
const metricsWriteTimeout = 10 * time.Second

// ServeMetrics serves the metrics and the probes, without a token, on ln
// until Shutdown; it returns nil after Shutdown. The API's own listener
// serves the metrics behind the token.
func (s *Server) ServeMetrics(ln net.Listener) error {
	s.addListenHosts(ln.Addr())
	s.log.Info("serving metrics", "addr", ln.Addr().String())
	// Bounded as the API's listener is, since its connections need no
	// token either: unbounded, idle ones took every descriptor the daemon
	// had, and the API answered nothing. But when full it lets the idlest
	// go, so that idle ones cannot keep the probes out. Its headers are
	// not counted in the API's header budget, which a scraper's must not
	// take from.
	// The probes have places of their own, which scrapes cannot take
	// (see metricsListener).
	bounded := newMetricsListener(jsonErrorListener{Listener: ln, max: metricsMaxConnections, open: new(connCount), idle: newIdleConns(true), spare: newSpareFD(),
		full: fmt.Sprintf("the metrics listener has %d connections serving requests or with one waiting, its most: try again", metricsMaxConnections)})
	if err := s.ms.Serve(bounded); err != http.ErrServerClosed {
		return err
	}
	return nil
}
