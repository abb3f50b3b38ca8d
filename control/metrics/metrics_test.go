package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/metrics"
)

// scrape fetches the handler's exposition in the text format and parses
// it as Prometheus does.
func scrape(t *testing.T, r *metrics.Recorder) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	r.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain"), rec.Header().Get("Content-Type"))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	require.NoError(t, err, "the exposition parses as the text format")
	return fams
}

// value is the value of the series of family name whose labels are
// pairs (name, value, …); ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, pairs ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(pairs)/2 {
			continue
		}
		for i := 0; i < len(pairs); i += 2 {
			if got[pairs[i]] != pairs[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.Histogram {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, name)
	require.Equal(t, dto.MetricType_HISTOGRAM, f.GetType(), name)
	require.Len(t, f.Metric, 1)
	return f.Metric[0].Histogram
}

func sources() metrics.Sources {
	return metrics.Sources{
		CacheStats: func() (uint64, uint64, int) { return 10, 4, 2 },
		Head:       func(context.Context) (uint64, error) { return 42, nil },
		Running:    func(context.Context) (int, error) { return 3, nil },
	}
}

// TestCountersMove: after a known sequence of recorder calls every
// metric says exactly what they did, and a second round moves each
// counter by exactly its own calls.
func TestCountersMove(t *testing.T) {
	r := metrics.New(sources())
	round := func() {
		r.ObserveBatch(3, 2*time.Millisecond)
		r.ObserveBatch(3, 2*time.Millisecond)
		r.ObserveBatch(1, time.Second)
		r.EventAppended("run_started")
		r.EventAppended("run_started")
		r.EventAppended("heartbeat")
		r.EventAppended("Not A Kind <x>")
		r.Request("project_status", "")
		r.Request("project_status", "")
		r.Request("project_status", "")
		r.Request("project_run_start", "conflict")
		r.Request("", "parse_error")
		r.ConnOpened()
		r.ConnOpened()
		r.ConnOpened()
		r.ConnClosed()
		r.RunsMarkedStale(2)
		r.RunsMarkedStale(0)
		r.HeartbeatCoalesced()
		r.HeartbeatCoalesced()
		r.Compacted()
		r.HTTPRequest(200)
		r.HTTPRequest(200)
		r.HTTPRequest(303)
		r.HTTPRefused("token")
		r.MailDecided("work", "reported")
		r.MailDecided("work", "reported")
		r.MailDecided("work", "skipped")
		r.MailDecided("Home.2", "skipped")
		r.MailDecided("boss@example.com", "reported")
	}
	check := func(fams map[string]*dto.MetricFamily, k float64) {
		t.Helper()
		for _, c := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"scv_ledger_events_appended_total", []string{"kind", "run_started"}, 2 * k},
			{"scv_ledger_events_appended_total", []string{"kind", "heartbeat"}, k},
			{"scv_ledger_events_appended_total", []string{"kind", "other"}, k},
			{"scv_control_requests_total", []string{"action", "project_status"}, 3 * k},
			{"scv_control_requests_total", []string{"action", "project_run_start"}, k},
			{"scv_control_requests_total", []string{"action", "none"}, k},
			{"scv_control_request_errors_total", []string{"action", "project_run_start", "reason", "conflict"}, k},
			{"scv_control_request_errors_total", []string{"action", "none", "reason", "parse_error"}, k},
			{"scv_control_connections", nil, 2 * k},
			{"scv_control_connections_opened_total", nil, 3 * k},
			{"scv_runs_marked_stale_total", nil, 2 * k},
			{"scv_heartbeats_coalesced_total", nil, 2 * k},
			{"scv_ledger_compactions_total", nil, k},
			{"scv_http_requests_total", []string{"code", "200"}, 2 * k},
			{"scv_http_requests_total", []string{"code", "303"}, k},
			{"scv_http_refused_total", []string{"reason", "token"}, k},
			{"scv_mail_decided_total", []string{"account", "work", "decision", "reported"}, 2 * k},
			{"scv_mail_decided_total", []string{"account", "work", "decision", "skipped"}, k},
			{"scv_mail_decided_total", []string{"account", "Home.2", "decision", "skipped"}, k},
			{"scv_mail_decided_total", []string{"account", "other", "decision", "reported"}, k},
			{"scv_ledger_head_sequence", nil, 42},
			{"scv_runs_running", nil, 3},
			{"scv_ledger_cache_hits_total", nil, 10},
			{"scv_ledger_cache_misses_total", nil, 4},
			{"scv_ledger_cache_projects", nil, 2},
		} {
			got, ok := value(fams, c.name, c.labels...)
			if assert.True(t, ok, "%s%v is exported", c.name, c.labels) {
				assert.Equal(t, c.want, got, "%s%v", c.name, c.labels)
			}
		}
		_, ok := value(fams, "scv_control_request_errors_total", "action", "project_status", "reason", "")
		assert.False(t, ok, "a success is no error")

		lat := histogram(t, fams, "scv_ledger_append_duration_seconds")
		assert.Equal(t, uint64(3*k), lat.GetSampleCount())
		assert.InDelta(t, 1.004*k, lat.GetSampleSum(), 1e-9)
		size := histogram(t, fams, "scv_ledger_append_batch_commands")
		assert.Equal(t, uint64(3*k), size.GetSampleCount())
		assert.Equal(t, 7*k, size.GetSampleSum())
		cum := map[float64]uint64{}
		for _, b := range size.Bucket {
			cum[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		assert.Equal(t, uint64(k), cum[1], "one batch of one command")
		assert.Equal(t, uint64(k), cum[2])
		assert.Equal(t, uint64(3*k), cum[4], "two of three")
		assert.Equal(t, uint64(3*k), cum[1024])
	}
	round()
	check(scrape(t, r), 1)
	round()
	check(scrape(t, r), 2)
	// The standard collectors are there too.
	_, ok := scrape(t, r)["go_goroutines"]
	assert.True(t, ok)
}

// TestNilRecorder: every method of a nil *Recorder does nothing, so a
// hook needs no check; its handler answers 404.
func TestNilRecorder(t *testing.T) {
	var r *metrics.Recorder
	assert.NotPanics(t, func() {
		r.ObserveBatch(1, time.Millisecond)
		r.EventAppended("x")
		r.Request("a", "b")
		r.ConnOpened()
		r.ConnClosed()
		r.RunsMarkedStale(1)
		r.HeartbeatCoalesced()
		r.Compacted()
		r.HTTPRequest(200)
		r.HTTPRefused("token")
		r.MailDecided("work", "skipped")
	})
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)
}

// TestSourceErrors: a source that fails is left out of that scrape and
// counted; the scrape still answers with everything else. A nil source
// is not exported at all.
func TestSourceErrors(t *testing.T) {
	src := sources()
	src.Head = func(context.Context) (uint64, error) { return 0, errors.New("database gone") }
	src.CacheStats = nil
	r := metrics.New(src)
	fams := scrape(t, r)
	n, _ := value(fams, "scv_metrics_source_errors_total", "source", "head")
	assert.Equal(t, 1.0, n, "the scrape counts its own failure")
	_, ok := value(fams, "scv_ledger_head_sequence")
	assert.False(t, ok)
	_, ok = value(fams, "scv_ledger_cache_hits_total")
	assert.False(t, ok)
	n, ok = value(fams, "scv_runs_running")
	assert.True(t, ok)
	assert.Equal(t, 3.0, n)
	fams = scrape(t, r)
	n, _ = value(fams, "scv_metrics_source_errors_total", "source", "head")
	assert.Equal(t, 2.0, n, "counted once per scrape")
}

// TestOwnRegistry: nothing is registered with the global default
// registry, and two recorders live side by side.
func TestOwnRegistry(t *testing.T) {
	a, b := metrics.New(sources()), metrics.New(sources())
	a.Compacted()
	fams, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		assert.False(t, strings.HasPrefix(f.GetName(), "scv_"), f.GetName())
	}
	na, _ := value(scrape(t, a), "scv_ledger_compactions_total")
	nb, _ := value(scrape(t, b), "scv_ledger_compactions_total")
	assert.Equal(t, []float64{1, 0}, []float64{na, nb})
}
