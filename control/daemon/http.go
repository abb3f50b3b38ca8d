package daemon

import (
	"context"
	"strconv"

	"scv/control/mcp"
	"scv/control/metrics"
	"scv/control/startstop"
	"scv/control/view"
	"scv/control/web"
	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// The web UI, /metrics and /mcp (Config.HTTP, `scv daemon --http ADDR`).

// checkHTTP refuses a web UI address that is not loopback, before the
// daemon touches anything.
func (c *Config) checkHTTP() error {
	if c.HTTP == "" {
		return nil
	}
	return web.CheckAddr(c.HTTP)
}

// httpServices is the web UI, with the daemon's metrics at /metrics, its
// live agents at /agents and the ledger as MCP tools at /mcp
// (control/mcp), when Config.HTTP asks for it; nothing
// otherwise. It reads the ledger the daemon has open at each request (a
// restart that fails reopens it), which is safe because the daemon stops
// its services before it closes the ledger and starts them again after.
func (d *Daemon) httpServices() []startstop.Service {
	if d.cfg.HTTP == "" {
		return nil
	}
	token, url := web.Files(d.cfg.Socket)
	d.web = &web.Server{
		Addr: d.cfg.HTTP, TokenFile: token, URLFile: url,
		Ledger: daemonLedger{d}, Questions: d.questions, Metrics: d.recorder(),
		StaleAfter: d.cfg.StaleAfter, DB: d.drv.Name(), Version: d.cfg.Version, Clock: d.cfg.Clock,
		Logger:  d.log.With("component", "web"),
		Handler: d.server.Service,
		Open:    "scv --socket " + view.ShellQuote(d.cfg.Socket) + " ui",
	}
	if d.agents != nil { // never a typed nil: the UI tells nil apart
		d.web.Agents = d.agents
	}
	if d.channels != nil {
		d.web.Mail = mailAccounts{d.channels}
	}
	// MCP at /mcp: the tools through the daemon's own Service, in
	// process, every request named mcp.HTTPCaller.
	d.web.MCP = mcp.HTTPHandler(d.server.Service, mcp.Options{Version: d.cfg.Version})
	return []startstop.Service{d.web}
}

// recorder is the daemon's metrics, made on first use; nil (which
// records nothing) without a web UI to serve them.
func (d *Daemon) recorder() *metrics.Recorder {
	if d.metrics == nil && d.cfg.HTTP != "" {
		d.metrics = metrics.New(metrics.Sources{
			CacheStats: func() (uint64, uint64, int) { return d.ledger.CacheStats() },
			Head: func(ctx context.Context) (seq uint64, err error) {
				err = d.ledger.Driver().Read(ctx, func(r driver.Reader) error {
					seq, _, err = r.LastSequence(ctx)
					return err
				})
				return seq, err
			},
			Running: func(ctx context.Context) (n int, err error) {
				err = d.ledger.Driver().Read(ctx, func(r driver.Reader) error {
					rows, err := r.Projects(ctx, driver.ProjectFilter{Running: true})
					for _, row := range rows {
						n += row.Running
					}
					return err
				})
				return n, err
			},
			Spend: d.spend,
		})
	}
	return d.metrics
}

// spend is what each project's runs spent, for the metrics: every
// project's state is read (from the ledger's cache, or loaded).
func (d *Daemon) spend(ctx context.Context) ([]metrics.Spend, error) {
	rows, err := d.ledger.Projects(ctx, true)
	if err != nil {
		return nil, err
	}
	var out []metrics.Spend
	for _, row := range rows {
		p, err := d.ledger.Project(ctx, row.ID)
		if err != nil {
			return nil, err
		}
		sp := p.Spend()
		if sp.Tokens == (reducer.Tokens{}) && len(sp.Cost) == 0 {
			continue
		}
		m := metrics.Spend{Project: p.Name, Tokens: map[string]uint64{}, Cost: map[string]float64{}}
		for i, n := range sp.Tokens.ByKind() {
			m.Tokens[reducer.TokenKinds[i]] = n
		}
		for _, c := range sp.Cost {
			m.Cost[c.Currency], _ = strconv.ParseFloat(c.Amount, 64)
		}
		out = append(out, m)
	}
	return out, nil
}

// Metrics is the daemon's metrics recorder (nil without a web UI).
func (d *Daemon) Metrics() *metrics.Recorder { return d.metrics }

// Web is the web UI (nil without Config.HTTP, or before Open).
func (d *Daemon) Web() *web.Server { return d.web }

// daemonLedger is the open ledger as the web UI reads it.
type daemonLedger struct{ d *Daemon }

func (l daemonLedger) Projects(ctx context.Context, all bool) ([]ledger.Summary, error) {
	return l.d.ledger.Projects(ctx, all)
}

func (l daemonLedger) Project(ctx context.Context, ref string) (*reducer.Project, error) {
	return l.d.ledger.Project(ctx, ref)
}

func (l daemonLedger) EventsPage(ctx context.Context, projectID string, after uint64, limit int) (ledger.Page, error) {
	return l.d.ledger.EventsPage(ctx, projectID, after, limit)
}
