package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/render"
	"scv/reducer"
)

// eventsEvery is how often --follow asks for new events.
const eventsEvery = 200 * time.Millisecond

// ProjectEventsOptions is `scv project events`.
type ProjectEventsOptions struct {
	c        *client
	Project  string
	After    uint64
	afterSet bool
	Follow   bool
}

func newProjectEventsCmd(c *client) *cobra.Command {
	o := &ProjectEventsOptions{c: c}
	cmd := &cobra.Command{
		Use:   "events PROJECT",
		Short: "A project's history: the events its state is derived from",
		Long: `List PROJECT's events in sequence order, one line each: sequence, time with
its zone, kind, and data as compact JSON (cut at a terminal's width). A
reply holds at most 1000 events; page with --after, the last sequence
listed.

--follow prints the history and then every event appended, in the same
format, until interrupted (Ctrl-C); when the daemon restarts it waits for
it (up to a minute) and goes on from the last event printed, with none
lost or repeated.
With --json each line is one event as the daemon wrote it (without
--follow: the daemon's reply).`,
		Example: `  scv project events acme
  scv project events acme --after 4
  scv project events acme --follow
  scv project events acme --follow --json | jq -c 'select(.kind=="run_finished")'`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.afterSet = args[0], cmd.Flags().Changed("after")
			if o.Follow {
				return o.follow()
			}
			return o.run()
		},
	}
	cmd.Flags().Uint64Var(&o.After, "after", 0, "list only the events after sequence `N`")
	cmd.Flags().BoolVar(&o.Follow, "follow", false, "keep printing new events as they are appended, until interrupted")
	return cmd
}

func (o *ProjectEventsOptions) run() error {
	c := api.CmdProjectEvents{Project: o.Project}
	if o.afterSet {
		c.After = &o.After
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error {
		r, err := projectOf(st, api.KindEvents)
		if err != nil {
			return err
		}
		o.compacted(r)
		if len(r.Events) == 0 {
			if c.After != nil {
				o.c.note("no events after %d", *c.After)
			} else {
				o.c.note("no events")
			}
			return nil
		}
		(&eventLines{p: p}).write(r.Events)
		if len(r.Events) >= reducer.MaxEventsPage {
			o.c.note("more events may follow: scv project events %s --after %d", o.Project, r.Events[len(r.Events)-1].Sequence)
		}
		return nil
	})
	return err
}

// compacted notes that the events before a compaction are not served.
func (o *ProjectEventsOptions) compacted(r *api.ProjectResponse) {
	if r.CompactedBefore != nil {
		o.c.note("events up to %d are compacted into a snapshot and the archive (scv ledger export has them)", *r.CompactedBefore)
	}
}

// follow prints the project's events from --after on and then every
// event appended, until SIGINT or SIGTERM. A daemon that stops or
// restarts is waited for (control/follow): the follower goes on with the
// events after the last one it printed.
func (o *ProjectEventsOptions) follow() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	lines := &eventLines{p: o.c.printer()}
	after := o.After
	noted := false // compacted_before noted
	err := o.c.follow(ctx, &follow.Follower{
		Pause: eventsEvery,
		Request: func() api.Command {
			cmd := api.CmdProjectEvents{Project: o.Project}
			if o.afterSet || after > 0 {
				cmd.After = &after
			}
			return cmd
		},
		Reply: func(st *api.DaemonStatus) (follow.Step, error) {
			r, err := projectOf(st, api.KindEvents)
			if err != nil {
				return follow.Stop, err
			}
			if !noted {
				o.compacted(r)
				noted = true
			}
			if o.c.json {
				for _, e := range r.Events {
					if err := o.c.printJSON(e); err != nil {
						return follow.Stop, err
					}
				}
			} else {
				lines.write(r.Events)
			}
			if n := len(r.Events); n > 0 {
				after = r.Events[n-1].Sequence
			}
			if len(r.Events) >= reducer.MaxEventsPage {
				return follow.Now, nil // a full page: there is more right away
			}
			return follow.Wait, nil
		},
		Back: func() { o.c.note("the daemon answers again; following from sequence %d", after) },
	}, o.c.note)
	if ctx.Err() != nil {
		return nil // interrupted: the normal end of --follow
	}
	return err
}

// eventLines writes events one line each, the same for `project events`
// and `project events --follow`: a header, then per event its sequence,
// its time with the zone, its kind and its data as compact JSON, the
// data cut at the width.
type eventLines struct {
	p       *printer
	started bool
	seqW    int
	kindW   int
}

// write prints events, the header first if it was not yet printed. The
// widths of the sequence and kind columns are those of the first events
// written (at least 3 and 12), so that later lines line up with them.
func (l *eventLines) write(events []api.ProjectEvent) {
	if len(events) == 0 {
		return
	}
	if !l.started {
		l.started = true
		l.seqW, l.kindW = 3, 12
		for _, e := range events {
			l.seqW = max(l.seqW, len(fmt.Sprint(e.Sequence)))
			l.kindW = max(l.kindW, utf8.RuneCountInString(render.Clean(e.Kind)))
		}
		l.line("SEQ", "TIME", "KIND", "DATA")
	}
	for _, e := range events {
		l.line(fmt.Sprint(e.Sequence), l.p.time(e.TimestampUnixSeconds), render.Clean(e.Kind), compactJSON(e.Data))
	}
}

func (l *eventLines) line(seq, at, kind, data string) {
	timeW := max(utf8.RuneCountInString(at), utf8.RuneCountInString(l.p.time(0)))
	s := fmt.Sprintf("%-*s  %-*s  %-*s  %s", l.seqW, seq, timeW, at, l.kindW, kind, data)
	if l.p.width > 0 {
		s = render.Cut(s, l.p.width)
	}
	fmt.Fprintln(l.p.w, strings.TrimRight(s, " "))
}

// compactJSON is data on one line; JSON escapes every control character
// inside strings, so the result is safe in a table cell.
func compactJSON(data json.RawMessage) string {
	if len(data) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return render.Clean(string(data))
	}
	return b.String()
}
