// Package metrics is the daemon's Prometheus metrics: what the ledger,
// the control server and the sweeper record as they work (a Recorder),
// and what is read when a scrape comes (Sources), in a registry of the
// daemon's own, never the global default one. The web UI serves it at
// /metrics (control/web), behind the UI's token.
//
// # Recording
//
// Every method of *Recorder is safe on a nil *Recorder, where it does
// nothing, and from any goroutine; none blocks or fails. A package that
// records holds an interface of the methods it calls (so it needs no
// import of this one) and calls them in one line where the thing happens:
//
//	l.metrics.ObserveBatch(len(reqs), time.Since(begin))
//
// Labels that come from input (event kinds, actions, reasons) are kept
// to lower-case words of at most 64 characters; anything else is counted
// under "other", so no input can grow the number of series.
//
// # Metrics
//
// docs/operations.md ("Metrics") lists every metric with its type and
// labels, and shows a scrape configuration.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of the daemon's own.
const Namespace = "scv"

// SourceTimeout bounds each Sources callback at a scrape.
const SourceTimeout = 5 * time.Second

// Sources are read at each scrape. A nil callback's metrics are not
// exported; one that fails is skipped for that scrape and counted in
// scv_metrics_source_errors_total.
type Sources struct {
	// CacheStats is the ledger's project cache (Ledger.CacheStats): hits
	// and misses since the ledger opened, projects held now.
	CacheStats func() (hits, misses uint64, cached int)
	// Head is the sequence of the ledger's newest event.
	Head func(ctx context.Context) (uint64, error)
	// Running is the number of running runs, over all projects.
	Running func(ctx context.Context) (int, error)
	// Spend is what each project's runs spent (docs/usage.md), of the
	// projects that spent anything.
	Spend func(ctx context.Context) ([]Spend, error)
}

// Spend is what one project's runs spent: tokens by kind, cost by
// currency (as a number: a metric is a float).
type Spend struct {
	Project string // its name
	Tokens  map[string]uint64
	Cost    map[string]float64
}

// Recorder holds the daemon's metrics and its registry.
type Recorder struct {
	reg *prometheus.Registry

	appendSeconds prometheus.Histogram
	batchCommands prometheus.Histogram
	events        *prometheus.CounterVec
	requests      *prometheus.CounterVec
	requestErrors *prometheus.CounterVec
	connsOpen     prometheus.Gauge
	connsTotal    prometheus.Counter
	staleMarked   prometheus.Counter
	coalesced     prometheus.Counter
	compactions   prometheus.Counter
	httpRequests  *prometheus.CounterVec
	httpRefused   *prometheus.CounterVec
	sourceErrors  *prometheus.CounterVec
	turnsStarted  prometheus.Counter
	turnsEnded    *prometheus.CounterVec
	mailDecided   *prometheus.CounterVec
}

// New makes the metrics, and a registry that holds them, src's, and the
// Go runtime's and the process's standard collectors.
func New(src Sources) *Recorder {
	r := &Recorder{reg: prometheus.NewRegistry()}
	opts := func(sub, name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: Namespace, Subsystem: sub, Name: name, Help: help}
	}
	counter := func(sub, name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(opts(sub, name, help)))
	}
	counterVec := func(sub, name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts(opts(sub, name, help)), labels)
	}
	r.appendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "ledger", Name: "append_duration_seconds",
		Help:    "Time of one write transaction of the ledger's writer, from its begin to its commit.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms to 4 s
	})
	r.batchCommands = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "ledger", Name: "append_batch_commands",
		Help:    "Commands decided in one write transaction (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 to 1024, MaxBatch
	})
	r.events = counterVec("ledger", "events_appended_total", "Events appended to the ledger, by kind.", "kind")
	r.requests = counterVec("control", "requests_total", "Requests answered on the control socket, by action.", "action")
	r.requestErrors = counterVec("control", "request_errors_total", "Requests answered with an error on the control socket, by action and reason.", "action", "reason")
	r.connsOpen = prometheus.NewGauge(prometheus.GaugeOpts(opts("control", "connections", "Connections open on the control socket.")))
	r.connsTotal = counter("control", "connections_opened_total", "Connections accepted on the control socket.")
	r.staleMarked = counter("", "runs_marked_stale_total", "Runs the sweeper marked stale.")
	r.coalesced = counter("", "heartbeats_coalesced_total", "Heartbeats accepted without an event, inside the coalescing interval.")
	r.compactions = counter("ledger", "compactions_total", "Compactions of a project's live events into a snapshot.")
	r.httpRequests = counterVec("http", "requests_total", "Requests to the web UI and /metrics that passed its checks, by status code.", "code")
	r.httpRefused = counterVec("http", "refused_total", "Requests to the web UI refused, by reason (token, host, origin).", "reason")
	r.sourceErrors = counterVec("metrics", "source_errors_total", "Scrape-time readings that failed, by source.", "source")
	r.turnsStarted = counter("work", "turns_started_total", "Turns the projects' work started (docs/work.md).")
	r.turnsEnded = counterVec("work", "turns_ended_total", "Turns of the projects' work that ended, by their run's outcome.", "status")
	r.mailDecided = counterVec("mail", "decided_total", "Mails an email account decided (docs/mail.md), by account and decision.", "account", "decision")
	r.reg.MustRegister(r.appendSeconds, r.batchCommands, r.events, r.requests, r.requestErrors, r.connsOpen,
		r.connsTotal, r.staleMarked, r.coalesced, r.compactions, r.httpRequests, r.httpRefused, r.turnsStarted, r.turnsEnded,
		r.mailDecided,
		// The collector of the sources exports their error counts after
		// it read them, so that a scrape counts its own failures.
		&sourceCollector{src: src, errs: r.sourceErrors},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Registry is the daemon's registry.
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Handler serves the registry in the Prometheus text format (or what the
// scraper asks for). A nil Recorder serves 404.
func (r *Recorder) Handler() http.Handler {
	if r == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ObserveBatch records one write transaction of the ledger's writer: the
// commands it decided and how long it took, begin to commit.
func (r *Recorder) ObserveBatch(commands int, d time.Duration) {
	if r == nil {
		return
	}
	r.batchCommands.Observe(float64(commands))
	r.appendSeconds.Observe(d.Seconds())
}

// EventAppended counts one committed event of kind.
func (r *Recorder) EventAppended(kind string) {
	if r == nil {
		return
	}
	r.events.WithLabelValues(word(kind)).Inc()
}

// Request counts one answered request of the control socket: its action
// ("" when the request could not be decoded) and, for an error, its
// reason word ("" for success).
func (r *Recorder) Request(action, reason string) {
	if r == nil {
		return
	}
	if action == "" {
		action = "none"
	}
	action = word(action)
	r.requests.WithLabelValues(action).Inc()
	if reason != "" {
		r.requestErrors.WithLabelValues(action, word(reason)).Inc()
	}
}

// ConnOpened counts a connection accepted on the control socket;
// ConnClosed one that ended.
func (r *Recorder) ConnOpened() {
	if r == nil {
		return
	}
	r.connsOpen.Inc()
	r.connsTotal.Inc()
}

// ConnClosed counts a connection of the control socket that ended.
func (r *Recorder) ConnClosed() {
	if r == nil {
		return
	}
	r.connsOpen.Dec()
}

// RunsMarkedStale counts n runs the sweeper marked stale.
func (r *Recorder) RunsMarkedStale(n int) {
	if r == nil || n <= 0 {
		return
	}
	r.staleMarked.Add(float64(n))
}

// HeartbeatCoalesced counts a heartbeat accepted without an event.
func (r *Recorder) HeartbeatCoalesced() {
	if r == nil {
		return
	}
	r.coalesced.Inc()
}

// TurnStarted counts a turn the work started.
func (r *Recorder) TurnStarted() {
	if r == nil {
		return
	}
	r.turnsStarted.Inc()
}

// TurnEnded counts a turn of the work that ended, by its run's status.
func (r *Recorder) TurnEnded(status string) {
	if r == nil {
		return
	}
	r.turnsEnded.WithLabelValues(word(status)).Inc()
}

// MailDecided counts one mail an email account decided: its account's
// name (not the mail's: no text of a mail is a label) and its decision,
// skipped or reported.
func (r *Recorder) MailDecided(account, decision string) {
	if r == nil {
		return
	}
	r.mailDecided.WithLabelValues(accountLabel(account), word(decision)).Inc()
}

// Compacted counts one compaction.
func (r *Recorder) Compacted() {
	if r == nil {
		return
	}
	r.compactions.Inc()
}

// HTTPRequest counts a web UI request that passed the checks, by the
// status it was answered with.
func (r *Recorder) HTTPRequest(code int) {
	if r == nil {
		return
	}
	r.httpRequests.WithLabelValues(strconv.Itoa(code)).Inc()
}

// HTTPRefused counts a web UI request refused for reason (a word such as
// "token", "host", "origin").
func (r *Recorder) HTTPRefused(reason string) {
	if r == nil {
		return
	}
	r.httpRefused.WithLabelValues(word(reason)).Inc()
}

// word is s as a label value: lower-case letters, digits and '_', 1 to
// 64 of them, else "other".
func word(s string) string {
	if s == "" || len(s) > 64 {
		return "other"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return "other"
		}
	}
	return s
}

// accountLabel is an account's name as a label value: 1 to 64 of the
// characters of an account name (api.CheckChatName), else "other".
func accountLabel(s string) string {
	if s == "" || len(s) > 64 {
		return "other"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "other"
		}
	}
	return s
}

// sourceCollector reads Sources at each scrape.
type sourceCollector struct {
	src  Sources
	errs *prometheus.CounterVec
}

var (
	descHead    = prometheus.NewDesc("scv_ledger_head_sequence", "The sequence of the ledger's newest event.", nil, nil)
	descRunning = prometheus.NewDesc("scv_runs_running", "Runs running now, over all projects.", nil, nil)
	descHits    = prometheus.NewDesc("scv_ledger_cache_hits_total", "Project reads served from the ledger's project cache.", nil, nil)
	descMisses  = prometheus.NewDesc("scv_ledger_cache_misses_total", "Project reads that loaded the project from the database.", nil, nil)
	descCached  = prometheus.NewDesc("scv_ledger_cache_projects", "Projects held in the ledger's project cache.", nil, nil)
	descTokens  = prometheus.NewDesc("scv_tokens_total", "Tokens the runs of a project reported spending, by kind.", []string{"project", "kind"}, nil)
	descCost    = prometheus.NewDesc("scv_cost_total", "What the runs of a project reported costing, by currency.", []string{"project", "currency"}, nil)
)

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	c.errs.Describe(ch)
	if c.src.Head != nil {
		ch <- descHead
	}
	if c.src.Running != nil {
		ch <- descRunning
	}
	if c.src.CacheStats != nil {
		ch <- descHits
		ch <- descMisses
		ch <- descCached
	}
	if c.src.Spend != nil {
		ch <- descTokens
		ch <- descCost
	}
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), SourceTimeout)
	defer cancel()
	if c.src.Head != nil {
		if seq, err := c.src.Head(ctx); err != nil {
			c.errs.WithLabelValues("head").Inc()
		} else {
			ch <- prometheus.MustNewConstMetric(descHead, prometheus.GaugeValue, float64(seq))
		}
	}
	if c.src.Running != nil {
		if n, err := c.src.Running(ctx); err != nil {
			c.errs.WithLabelValues("running").Inc()
		} else {
			ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(n))
		}
	}
	if c.src.CacheStats != nil {
		hits, misses, cached := c.src.CacheStats()
		ch <- prometheus.MustNewConstMetric(descHits, prometheus.CounterValue, float64(hits))
		ch <- prometheus.MustNewConstMetric(descMisses, prometheus.CounterValue, float64(misses))
		ch <- prometheus.MustNewConstMetric(descCached, prometheus.GaugeValue, float64(cached))
	}
	if c.src.Spend != nil {
		if spent, err := c.src.Spend(ctx); err != nil {
			c.errs.WithLabelValues("spend").Inc()
		} else {
			for _, s := range spent {
				for kind, n := range s.Tokens {
					ch <- prometheus.MustNewConstMetric(descTokens, prometheus.CounterValue, float64(n), s.Project, kind)
				}
				for cur, x := range s.Cost {
					ch <- prometheus.MustNewConstMetric(descCost, prometheus.CounterValue, x, s.Project, cur)
				}
			}
		}
	}
	c.errs.Collect(ch)
}
