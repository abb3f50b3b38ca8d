package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/render"
	"scv/ledger"
	"scv/reducer"
)

// newLedgerCmd is `scv ledger`: the ledger's own tools. verify, export
// and copy read the database file itself, with or without a daemon
// running; compact asks the daemon.
func newLedgerCmd(c *client) *cobra.Command {
	cmd := group("ledger", "Verify, export, compact or copy the ledger",
		newVerifyCmd(c), newExportCmd(c), newCompactCmd(c), newCopyCmd(c), newLeaseCmd(c))
	cmd.Example = `  scv ledger verify
  scv ledger export acme -o acme.jsonl && scv ledger verify --bundle acme.jsonl
  scv ledger compact acme --retain 100`
	cmd.Long = `The ledger's own tools. verify, export, copy and lease read the database file
itself (--db, default $SCV_DB, else ~/.local/state/scv/ledger.db), with or
without a daemon running, and change nothing in it; compact asks the
running daemon.`
	return cmd
}

// VerifyOptions is `scv ledger verify`.
type VerifyOptions struct {
	c       *client
	DB      string
	Project string
	Bundle  string
	Heads   headFlags
}

func newVerifyCmd(c *client) *cobra.Command {
	o := &VerifyOptions{c: c, Heads: headFlags{}}
	cmd := &cobra.Command{
		Use:   "verify [--db PATH | --bundle FILE]",
		Short: "Check the hash chains of a database file, or of an exported bundle",
		Long: `Check a ledger without changing it: SQLite's integrity_check (a PostgreSQL
database has none: its line says so, and --json leaves "integrity" out),
every event's hash chained to the one before it, that each project starts
with its creation, that the reducer accepts the whole history, and every
snapshot against the events before it. With --bundle it checks a bundle
that scv ledger export wrote, with no database at all.

It prints each project's event count and chain head: keep the heads, and
pass them back with --head to prove that nothing was cut off the end.
Exit 0 when intact; 4 with one "problem:" line per finding on stderr (at
most 100); 1 when the file cannot be read. On a terminal it shows its
progress on stderr.`,
		Example: `  scv ledger verify
  scv ledger verify --db ~/.local/state/scv/ledger.db --project acme
  scv ledger verify --db postgres://scv@db/scv
  scv ledger verify --bundle acme.jsonl --head 01M8KF5HYJ2DXGJ2HQ3HH93JQJ=9f3c…
  scv ledger verify --json | jq .intact`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("bundle") {
				for _, f := range []string{"db", "project"} {
					if cmd.Flags().Changed(f) {
						return usagef("--bundle and --%s exclude each other", f)
					}
				}
				if o.Bundle == "" {
					return usagef("--bundle needs a file")
				}
				return o.runBundle()
			}
			return o.run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DB, "db", daemon.DefaultDB(), "the ledger database `PATH` or URL (env SCV_DB)")
	f.StringVar(&o.Project, "project", "", "verify only this project, `P` (ID or name)")
	f.StringVar(&o.Bundle, "bundle", "", "verify the bundle `FILE` that scv ledger export wrote instead of a database (-: stdin)")
	f.Var(o.Heads, "head", "a chain head saved earlier, `PROJECT_ID=HEX` (repeatable): also proves no event was cut off the end")
	return cmd
}

// headFlags collects repeated --head PROJECT=HEX.
type headFlags map[string][]byte

func (h headFlags) String() string { return "" }

func (h headFlags) Type() string { return "PROJECT_ID=HEX" }

func (h headFlags) Set(v string) error {
	id, hx, ok := strings.Cut(v, "=")
	b, err := hex.DecodeString(hx)
	if !ok || err != nil || len(b) != ledger.HashSize {
		return fmt.Errorf("want PROJECT_ID=%d-byte hex hash", ledger.HashSize)
	}
	h[id] = b
	return nil
}

// progress is a progress line on stderr when it is a terminal (nil
// elsewhere, and under --json).
func (c *client) progress(what string) func(done, total int) {
	if c.json || !isTerminal(c.stderr) {
		return nil
	}
	return func(done, total int) {
		fmt.Fprintf(c.stderr, "\r%s: %d/%d events (%d%%)", what, done, total, done*100/max(total, 1))
		if done == total {
			fmt.Fprintln(c.stderr)
		}
	}
}

func (o *VerifyOptions) run() error {
	opts := ledger.VerifyOptions{Project: o.Project, Heads: o.Heads, Progress: o.c.progress("verifying")}
	ctx := context.Background()
	drv, err := daemon.OpenLedger(ctx, o.DB, false)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer drv.Close()
	rep, err := ledger.Verify(ctx, drv, opts)
	if err != nil {
		return err
	}
	return o.print(rep, false)
}

func (o *VerifyOptions) runBundle() error {
	r, err := o.c.openInput(o.Bundle, "the bundle")
	if err != nil {
		return fmt.Errorf("ledger verify: %w", err)
	}
	defer r.Close()
	rep, err := ledger.VerifyBundle(r, o.Heads)
	if err != nil {
		return err
	}
	return o.print(rep, true)
}

// verifyJSON is `scv ledger verify --json`.
type verifyJSON struct {
	Intact    bool        `json:"intact"`
	Integrity string      `json:"integrity,omitempty"`
	Events    int         `json:"events"`
	Snapshots int         `json:"snapshots"`
	Chains    []chainJSON `json:"chains"`
	Problems  []string    `json:"problems"`
}

type chainJSON struct {
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	Events    int    `json:"events"`
	Head      string `json:"head"`
	From      uint64 `json:"from,omitempty"`
}

func (o *VerifyOptions) print(rep *ledger.VerifyReport, bundle bool) error {
	problems := make([]string, len(rep.Problems))
	for i, p := range rep.Problems {
		problems[i] = p.String()
	}
	var failed error
	if len(problems) > 0 {
		failed = verifyError{problems[0]}
	}
	if o.c.json {
		v := verifyJSON{Intact: len(problems) == 0, Integrity: rep.Integrity, Events: rep.Events, Snapshots: rep.Snapshots,
			Chains: []chainJSON{}, Problems: problems}
		for _, c := range rep.Chains {
			v.Chains = append(v.Chains, chainJSON{c.ProjectID, c.Name, c.Events, hex.EncodeToString(c.Head), c.From})
		}
		if err := o.c.printJSON(v); err != nil {
			return err
		}
		return failed
	}
	p := o.c.printer()
	printChains(p, rep)
	switch {
	case bundle:
	case rep.Integrity == "":
		// PostgreSQL: no file check of its own to run from here.
		fmt.Fprintln(p.w, "integrity_check: none: this database has no file check of its own (SQLite's); the chains, histories and snapshots are checked")
	default:
		fmt.Fprintf(p.w, "integrity_check: %s\n", render.Paint(rep.Integrity, p.color))
	}
	if failed == nil {
		if bundle {
			fmt.Fprintf(p.w, "bundle: %d events, %d snapshots: %s\n", rep.Events, rep.Snapshots, render.Paint("intact", p.color))
		} else {
			fmt.Fprintf(p.w, "%d events in %d projects: %s\n", rep.Events, len(rep.Chains), render.Paint("intact", p.color))
		}
		return nil
	}
	for _, pr := range problems {
		fmt.Fprintln(o.c.stderr, "problem:", pr)
	}
	return failed
}

func printChains(p *printer, rep *ledger.VerifyReport) {
	t := render.NewTable("~PROJECT", "ID", "EVENTS", "CHAIN HEAD")
	for _, c := range rep.Chains {
		t.Add(dash(c.Name), c.ProjectID, fmt.Sprint(c.Events), hex.EncodeToString(c.Head))
	}
	p.table(t)
	for _, c := range rep.Chains {
		if c.From > 0 {
			fmt.Fprintf(p.w, "%s: the events up to %d were dropped by compaction; its chain starts at the snapshot there\n", dash(c.Name), c.From)
		}
	}
}

// ExportOptions is `scv ledger export`.
type ExportOptions struct {
	c       *client
	DB      string
	Project string
	Output  string
}

func newExportCmd(c *client) *cobra.Command {
	o := &ExportOptions{c: c}
	cmd := &cobra.Command{
		Use:   "export PROJECT [-o FILE]",
		Short: "Write a project's whole history as a self-verifying bundle",
		Long: `Write PROJECT's whole history (archive and live tail), its snapshots and a
manifest as a bundle, JSON Lines, to FILE or stdout, reading the database
file in one transaction. scv ledger verify --bundle checks it with no
database. A summary line with the chain head goes to stdout with -o, else
to stderr; with --json the summary is the manifest as JSON (with -o only:
without it, the bundle itself is the output).`,
		Example: `  scv ledger export acme -o acme.jsonl
  scv ledger export acme --db /backup/ledger.db | gzip > acme.jsonl.gz`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project = args[0]
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.DB, "db", daemon.DefaultDB(), "the ledger database `PATH` or URL (env SCV_DB)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "write the bundle to `FILE` instead of stdout")
	return cmd
}

// countingWriter counts the lines written through it.
type countingWriter struct {
	w     io.Writer
	lines atomic.Int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			cw.lines.Add(1)
		}
	}
	return cw.w.Write(p)
}

func (o *ExportOptions) run() error {
	ctx := context.Background()
	drv, err := daemon.OpenLedger(ctx, o.DB, false)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer drv.Close()
	w, summary := o.c.stdout, o.c.stderr // the bundle goes to stdout: say what it holds elsewhere
	var f *os.File
	if o.Output != "" && o.Output != "-" {
		if f, err = os.Create(o.Output); err != nil {
			return fmt.Errorf("ledger export: %w", err)
		}
		w, summary = f, o.c.stdout
	}
	cw := &countingWriter{w: w}
	done := make(chan struct{})
	if !o.c.json && isTerminal(o.c.stderr) {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					fmt.Fprintf(o.c.stderr, "\rexporting %s: %d lines", o.Project, cw.lines.Load())
				}
			}
		}()
	}
	m, err := ledger.Export(ctx, drv, o.Project, cw)
	close(done)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(o.Output) // no half bundle
		}
	}
	if !o.c.json && isTerminal(o.c.stderr) {
		fmt.Fprint(o.c.stderr, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	if o.c.json {
		if f != nil {
			return o.c.printJSON(m)
		}
		return nil // the bundle is the output; its manifest line is in it
	}
	fmt.Fprintf(summary, "%s (%s): %d events, %d snapshots, sequences %d to %d, chain head %s\n",
		dash(m.Name), m.ProjectID, m.Events, m.Snapshots, m.FirstSequence, m.LastSequence, m.ChainHead)
	return nil
}

// CompactOptions is `scv ledger compact`.
type CompactOptions struct {
	c       *client
	Project string
	Retain  uint64
	Drop    bool
}

func newCompactCmd(c *client) *cobra.Command {
	o := &CompactOptions{c: c}
	cmd := &cobra.Command{
		Use:   "compact PROJECT [--retain K]",
		Short: "Fold a project's old events into a snapshot and the archive, now",
		Long: fmt.Sprintf(`Ask the running daemon to compact PROJECT now: write a snapshot of its state
and move its events, all but the --retain newest, from the live tail into
the archive (or delete them with --drop: the snapshot then stands for
them). --retain defaults to %d, the daemon's own --retain default;
--retain 0 folds everything up to the newest event. Nothing you read
changes.`, daemon.DefaultRetain),
		Example: `  scv ledger compact acme
  scv ledger compact acme --retain 100`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project = args[0]
			return o.run()
		},
	}
	cmd.Flags().Uint64Var(&o.Retain, "retain", daemon.DefaultRetain, "keep the `K` newest events live")
	cmd.Flags().BoolVar(&o.Drop, "drop", false, "delete the compacted events instead of archiving them (the snapshot stands for them)")
	return cmd
}

func (o *CompactOptions) run() error {
	cmd := api.CmdLedgerCompact{Project: o.Project, Retain: &o.Retain, Drop: o.Drop}
	if o.c.json {
		_, err := o.c.call(cmd, nil)
		return err
	}
	if isTerminal(o.c.stderr) {
		fmt.Fprintf(o.c.stderr, "compacting %s…", o.Project)
	}
	st, err := o.c.do(cmd)
	if isTerminal(o.c.stderr) {
		fmt.Fprint(o.c.stderr, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	ev, err := o.c.do(api.CmdProjectEvents{Project: o.Project})
	if err != nil {
		return err
	}
	live := fmt.Sprint(len(ev.Project.Events))
	if len(ev.Project.Events) >= reducer.MaxEventsPage {
		live = fmt.Sprintf("%d or more", reducer.MaxEventsPage)
	}
	name := o.Project
	if st.Project != nil && st.Project.Project != nil {
		name = st.Project.Project.Name
	}
	if cb := ev.Project.CompactedBefore; cb != nil {
		fmt.Fprintf(o.c.stdout, "%s: events up to %d are in the snapshot and the archive; %s live\n", name, *cb, live)
	} else {
		fmt.Fprintf(o.c.stdout, "%s: nothing to compact; %s events live\n", name, live)
	}
	return nil
}

// CopyOptions is `scv ledger copy`.
type CopyOptions struct {
	c        *client
	From, To string
}

func newCopyCmd(c *client) *cobra.Command {
	o := &CopyOptions{c: c}
	cmd := &cobra.Command{
		Use:   "copy --from PATH --to URL",
		Short: "Copy a ledger into an empty database, sequences and hashes unchanged",
		Long: `Copy the ledger at --from (a SQLite file, with no daemon writing it) into the
empty database --to (a postgres:// URL for a fleet, or a path), sequences
and hashes unchanged, and verify the copy against the original.`,
		Example: `  scv ledger copy --from ~/.local/state/scv/ledger.db --to postgres://scv@db/scv`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.From == "" || o.To == "" {
				return usagef("give both --from and --to")
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.From, "from", "", "the ledger to copy: a SQLite `PATH` (or a URL)")
	cmd.Flags().StringVar(&o.To, "to", "", "the empty database to copy it into: a postgres:// `URL` (or a path)")
	return cmd
}

// copyJSON is `scv ledger copy --json`.
type copyJSON struct {
	Events    int    `json:"events"`
	Archived  int    `json:"archived"`
	Snapshots int    `json:"snapshots"`
	Projects  int    `json:"projects"`
	From      string `json:"from"`
	To        string `json:"to"`
}

func (o *CopyOptions) run() error {
	ctx := context.Background()
	src, err := daemon.OpenLedger(ctx, o.From, false)
	if err != nil {
		return fmt.Errorf("ledger copy: %w", err)
	}
	defer src.Close()
	dst, err := daemon.OpenLedger(ctx, o.To, true)
	if err != nil {
		return fmt.Errorf("ledger copy: %w", err)
	}
	defer dst.Close()
	rep, err := ledger.Copy(ctx, src, dst, o.c.progress("copying"))
	if err != nil {
		return err
	}
	if o.c.json {
		return o.c.printJSON(copyJSON{rep.Events, rep.Archived, rep.Snapshots, rep.Projects, src.Name(), dst.Name()})
	}
	printChains(o.c.printer(), rep.To)
	fmt.Fprintf(o.c.stdout, "copied %d events (%d archived), %d snapshots, %d projects from %s to %s: verified, the same chains and heads\n",
		rep.Events, rep.Archived, rep.Snapshots, rep.Projects, src.Name(), dst.Name())
	return nil
}

// LeaseOptions is `scv ledger lease`.
type LeaseOptions struct {
	c  *client
	DB string
}

func newLeaseCmd(c *client) *cobra.Command {
	o := &LeaseOptions{c: c}
	cmd := &cobra.Command{
		Use:   "lease [--db URL]",
		Short: "Show who holds the ledger-wide jobs (the sweeper), in which term, until when",
		Long: `Show the leases of a ledger: which daemon holds each ledger-wide job (the
sweeper, which marks stale runs and compacts), in which term, and until
when. With daemons sharing a PostgreSQL ledger, a lease whose holder died
is taken over by another daemon once it has expired.`,
		Example: `  scv ledger lease --db postgres://scv@db/scv`,
		Args:    exactArgs(),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.run() },
	}
	cmd.Flags().StringVar(&o.DB, "db", daemon.DefaultDB(), "the ledger database `PATH` or URL (env SCV_DB)")
	return cmd
}

func (o *LeaseOptions) run() error {
	ctx := context.Background()
	drv, err := daemon.OpenLedger(ctx, o.DB, false)
	if err != nil {
		return fmt.Errorf("ledger lease: %w", err)
	}
	defer drv.Close()
	leases, err := ledger.Leases(ctx, drv)
	if err != nil {
		return fmt.Errorf("ledger lease: %w", err)
	}
	if o.c.json {
		return o.c.printJSON(append([]ledger.Lease{}, leases...)) // [] when none
	}
	if len(leases) == 0 {
		if drv.Shared() {
			o.c.note("no leases in %s: no daemon has swept it yet", drv.Name())
		} else {
			o.c.note("no leases in %s: a daemon alone on its file sweeps without one", drv.Name())
		}
		return nil
	}
	p := o.c.printer()
	t := render.NewTable("LEASE", "~HOLDER", "TERM", "EXPIRES")
	for _, l := range leases {
		t.Add(l.Name, l.Holder, fmt.Sprint(l.Term), p.stamp(uint64(l.Expires/1000)))
	}
	return p.table(t)
}
