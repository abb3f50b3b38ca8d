package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"scv/control/daemon"
	"scv/control/render"
	"scv/control/view"
	"scv/ledger"
)

// The pictures of a project: `scv project graph`, `scv project timeline`
// and `scv project report --html`. They read the ledger database itself,
// read-only, as --at does (with or without a daemon, a SQLite path or a
// postgres:// URL), and draw with control/render from control/view's
// model of the project: no wire action, one adapter.

// pictureFormats are the formats of each picture; the first is the
// default.
var pictureFormats = map[string][]string{
	"graph":    {"text", "svg", "dot"},
	"timeline": {"text", "svg"},
}

// PictureOptions is `scv project graph` and `scv project timeline`.
type PictureOptions struct {
	c          *client
	kind       string // graph or timeline
	Project    string
	Format     string
	At         uint64
	DB         string
	Output     string
	StaleAfter time.Duration
	ASCII      bool
	atSet      bool
}

func newProjectGraphCmd(c *client) *cobra.Command {
	return newPictureCmd(c, "graph", "Draw a project's task graph: text, SVG or Graphviz DOT",
		`Draw PROJECT's task graph: the tasks in layers, each below the tasks it
depends on, with its status, attempts and retries. --format text (the
default) draws it for a terminal, cut to its width; svg writes a
standalone SVG document (one node per task); dot writes Graphviz's DOT
language, for dot -Tpng and friends.`,
		`  scv project graph acme
  scv project graph acme --format svg -o acme-graph.svg
  scv project graph acme --format dot | dot -Tpng > acme.png
  scv project graph acme --at 12`)
}

func newProjectTimelineCmd(c *client) *cobra.Command {
	return newPictureCmd(c, "timeline", "Draw a project's runs over time: text or SVG",
		`Draw PROJECT's runs on a time axis, one row per task and one bar per run
(to now while it runs; an archived project's axis ends at its last
event), with heartbeat gaps (a silence of over half of
--stale-after), stale marks, approvals and retries, and the critical path:
the chain of runs that decided how long the project took. --format text
(the default) draws it for a terminal, cut to its width; svg writes a
standalone SVG document.`,
		`  scv project timeline acme
  scv project timeline acme --format svg -o acme-timeline.svg
  scv project timeline acme --at 12 --db ~/.local/state/scv/ledger.db`)
}

const pictureLong = `

It reads the ledger database itself (--db), read-only, with or without a
daemon running: as the ledger stands now, or with --at SEQ as it stood
after sequence SEQ (the sequences scv project events lists; a SEQ past
the newest event is refused). The drawing goes to stdout, or to the file
-o FILE (a line saying what was written then goes to stdout). Under --json
it prints {"project_id","name","sequence","format","bytes"} and either
"file" (with -o FILE) or "content", the drawing itself.`

func newPictureCmd(c *client, kind, short, long, example string) *cobra.Command {
	o := &PictureOptions{c: c, kind: kind}
	formats := pictureFormats[kind]
	cmd := &cobra.Command{
		Use:               kind + " PROJECT",
		Short:             short,
		Long:              long + pictureLong,
		Example:           example,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.atSet = args[0], cmd.Flags().Changed("at")
			if !slices.Contains(formats, o.Format) {
				return usagef("--format %q: want one of %s", o.Format, strings.Join(formats, ", "))
			}
			if o.StaleAfter <= 0 {
				return usagef("--stale-after must be positive")
			}
			return o.run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Format, "format", formats[0], "the drawing's `FORMAT`: "+strings.Join(formats, "|"))
	f.Uint64Var(&o.At, "at", 0, "draw the project as the ledger stood after sequence `SEQ` (default: now)")
	f.StringVar(&o.DB, "db", daemon.DefaultDB(), "the ledger database `PATH` or URL (env SCV_DB)")
	f.StringVarP(&o.Output, "output", "o", "", "write the drawing to `FILE` instead of stdout (-: stdout)")
	f.BoolVar(&o.ASCII, "ascii", false, "with --format text: draw with ASCII characters only")
	if kind == "timeline" {
		f.DurationVar(&o.StaleAfter, "stale-after", daemon.DefaultStaleAfter, "the daemon's --stale-after: a run silent for over half of it shows a gap")
	} else {
		o.StaleAfter = daemon.DefaultStaleAfter
	}
	cmd.RegisterFlagCompletionFunc("format", words(formats...))
	return cmd
}

func (o *PictureOptions) run() error {
	pic, _, now, err := o.c.readPicture(o.DB, o.Project, o.At, o.atSet)
	if err != nil {
		return err
	}
	m := view.Model(pic.Project, pic.Events, view.Options{Now: now, StaleAfter: o.StaleAfter})
	toStdout := o.Output == "" || o.Output == "-"
	opts := render.TextOptions{ASCII: o.ASCII}
	if toStdout && !o.c.json {
		opts.Width, opts.Color = widthOf(o.c.stdout), colorFor(o.c.stdout, false)
	}
	var b bytes.Buffer
	switch o.kind + " " + o.Format {
	case "graph text":
		err = render.GraphText(&b, m, opts)
	case "graph svg":
		err = render.GraphSVG(&b, m)
	case "graph dot":
		err = render.GraphDOT(&b, m)
	case "timeline text":
		err = render.TimelineText(&b, m, opts)
	case "timeline svg":
		err = render.TimelineSVG(&b, m)
	}
	if err != nil {
		return fmt.Errorf("draw the %s: %w", o.kind, err)
	}
	if o.Format == "svg" && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteByte('\n')
	}
	return o.c.writePicture(pic, o.kind, o.Format, o.Output, b.Bytes())
}

// html is `scv project report PROJECT --html`: the self-contained HTML
// report, from the database file.
func (o *ProjectViewOptions) html() error {
	pic, db, now, err := o.c.readPicture(o.DB, o.Project, o.At, o.atSet)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := view.Report(&b, pic.Project, pic.Events, view.ReportOptions{
		Options: view.Options{Now: now, StaleAfter: o.StaleAfter}, DB: db, Version: version,
	}); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return o.c.writePicture(pic, "report", "html", o.Output, b.Bytes())
}

// readPicture reads project from the database db: as of sequence at
// when atSet, else at the head. It returns the picture, the database's
// name (for the report's verify command) and the time the drawing is as
// of: now, or for a past state the time of its last update, so that the
// same --at always draws the same.
func (c *client) readPicture(db, project string, at uint64, atSet bool) (*ledger.Picture, string, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	drv, err := daemon.OpenLedger(ctx, db, false)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	defer drv.Close()
	if !atSet {
		pic, err := ledger.PictureNow(ctx, drv, project)
		return pic, drv.Name(), c.now(), err
	}
	pic, err := ledger.PictureAt(ctx, drv, project, at)
	if err != nil {
		return nil, "", time.Time{}, atError(at, err)
	}
	return pic, drv.Name(), time.UnixMilli(pic.Project.Updated), nil
}

// atError is err of a read as of sequence at, said once.
func atError(at uint64, err error) error {
	if errors.Is(err, ledger.ErrBeyondHead) {
		// "sequence N is past the ledger's head, H"
		msg := err.Error()
		if i := strings.LastIndex(msg, ": sequence "); i >= 0 {
			msg = msg[i+2:]
		}
		return saidError{fmt.Sprintf("--at %d: %s", at, msg), err}
	}
	return fmt.Errorf("--at %d: %w", at, err)
}

// pictureJSON is what the picture commands print under --json.
type pictureJSON struct {
	ProjectID string  `json:"project_id"`
	Name      string  `json:"name"`
	Sequence  uint64  `json:"sequence"`
	Format    string  `json:"format"`
	Bytes     int     `json:"bytes"`
	File      string  `json:"file,omitempty"`
	Content   *string `json:"content,omitempty"`
}

// writePicture writes a drawing of pic (what, in format) to the file out,
// or to stdout when out is "" or "-", and says what it wrote: a line
// with -o FILE, or the JSON object under --json.
func (c *client) writePicture(pic *ledger.Picture, what, format, out string, doc []byte) error {
	p := pic.Project
	j := pictureJSON{ProjectID: p.ID, Name: p.Name, Sequence: pic.Seq, Format: format, Bytes: len(doc)}
	if out == "" || out == "-" {
		if c.json {
			s := string(doc)
			j.Content = &s
			return c.printJSON(j)
		}
		_, err := c.stdout.Write(doc)
		return err
	}
	if err := os.WriteFile(out, doc, 0o666); err != nil {
		os.Remove(out) // no half drawing
		return fmt.Errorf("write the %s: %w", what, err)
	}
	if c.json {
		j.File = out
		return c.printJSON(j)
	}
	_, err := fmt.Fprintf(c.stdout, "%s: %s (%s) as of sequence %d written to %s\n", render.Clean(p.Name), what, format, pic.Seq, out)
	return err
}
