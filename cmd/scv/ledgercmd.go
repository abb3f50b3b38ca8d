package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"scv/control"
	"scv/ledger"
	"scv/ledger/driver"
)

// runLedger is `scv ledger SUBCOMMAND`: tools that read the database file
// itself, with or without a daemon running.
// c carries the global flags given before `ledger`, if any.
func runLedger(c *client, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && args[0] == "verify":
		return runVerify(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "compact":
		return runCompact(c, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "export":
		return runExport(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "copy":
		return runCopy(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "lease":
		return runLease(args[1:], stdout, stderr)
	}
	return usageError{"usage: scv ledger verify --db PATH [--project P] [--head PROJECT=HEX ...]\n" +
		"       scv ledger verify --bundle FILE [--head PROJECT=HEX ...]\n" +
		"       scv ledger export --db PATH PROJECT [-o FILE]\n" +
		"       scv ledger copy --from PATH --to URL\n" +
		"       scv ledger lease --db URL\n" +
		"       scv ledger compact PROJECT [--retain K] [--socket PATH] [--json]"}
}

// runCompact is `scv ledger compact PROJECT [--retain K]`: through the
// daemon, fold the project's live events into a snapshot, keeping its K
// newest (default 0) live, and archive the rest.
func runCompact(c *client, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv ledger compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.globalFlags(fs)
	retain := fs.Uint64("retain", 0, "keep the `K` newest events live")
	drop := fs.Bool("drop", false, "delete the compacted events instead of archiving them (the snapshot stands for them)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{"scv ledger compact: " + err.Error()}
	}
	if len(pos) != 1 {
		return usageError{"usage: scv ledger compact PROJECT [--retain K]"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cl, err := control.Dial(ctx, c.socket)
	if err != nil {
		return c.dialError(err)
	}
	defer cl.Close()
	cmd := control.CmdLedgerCompact{Project: pos[0], Retain: retain, Drop: *drop}
	if c.json {
		raw, err := cl.CallRaw(ctx, cmd)
		if err != nil {
			return callError(err)
		}
		_, err = fmt.Fprintf(stdout, "%s\n", raw)
		return err
	}
	st, err := cl.Call(ctx, cmd)
	if err != nil {
		return callError(err)
	}
	ev, err := cl.Call(ctx, control.CmdProjectEvents{Project: pos[0]})
	if err != nil {
		return callError(err)
	}
	live := fmt.Sprint(len(ev.Project.Events))
	if len(ev.Project.Events) >= ledger.MaxPage {
		live = fmt.Sprintf("%d or more", ledger.MaxPage)
	}
	if cb := ev.Project.CompactedBefore; cb != nil {
		fmt.Fprintf(stdout, "%s: events up to %d are in the snapshot and the archive; %s live\n", st.Project.Project.Name, *cb, live)
	} else {
		fmt.Fprintf(stdout, "%s: nothing to compact; %s events live\n", st.Project.Project.Name, live)
	}
	return nil
}

// headFlags collects repeated --head PROJECT=HEX.
type headFlags map[string][]byte

func (h headFlags) String() string { return "" }

func (h headFlags) Set(v string) error {
	id, hx, ok := strings.Cut(v, "=")
	b, err := hex.DecodeString(hx)
	if !ok || err != nil || len(b) != ledger.HashSize {
		return fmt.Errorf("want PROJECT_ID=%d-byte hex hash", ledger.HashSize)
	}
	h[id] = b
	return nil
}

// runVerify is `scv ledger verify`: exit 0 when the database is intact,
// else 1, naming the project, the first bad sequence and what is wrong.
func runVerify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv ledger verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDBPath(), "the ledger database `path` (env SCV_DB)")
	project := fs.String("project", "", "verify only this project (ID or name)")
	bundle := fs.String("bundle", "", "verify the bundle `file` that `scv ledger export` wrote instead of a database (\"-\": stdin)")
	heads := headFlags{}
	fs.Var(heads, "head", "a chain head saved earlier, `PROJECT_ID=HEX` (repeatable): also proves no event was cut off the end")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{"scv ledger verify: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{"scv ledger verify: unexpected argument " + fs.Arg(0)}
	}
	if isSet(fs, "bundle") {
		for _, f := range []string{"db", "project"} {
			if isSet(fs, f) {
				return usageError{"scv ledger verify: --bundle and --" + f + " exclude each other"}
			}
		}
		if *bundle == "" {
			return usageError{"scv ledger verify: --bundle needs a file"}
		}
		return runVerifyBundle(*bundle, heads, stdout, stderr)
	}
	opts := ledger.VerifyOptions{Project: *project, Heads: heads}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		opts.Progress = func(done, total int) {
			fmt.Fprintf(f, "\rverifying: %d/%d events (%d%%)", done, total, done*100/max(total, 1))
			if done == total {
				fmt.Fprintln(f)
			}
		}
	}
	ctx := context.Background()
	drv, err := openReadOnly(ctx, *db)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer drv.Close()
	rep, err := ledger.Verify(ctx, drv, opts)
	if err != nil {
		return err
	}
	printChains(stdout, rep)
	fmt.Fprintf(stdout, "integrity_check: %s\n", rep.Integrity)
	if len(rep.Problems) == 0 {
		fmt.Fprintf(stdout, "%d events in %d projects: intact\n", rep.Events, len(rep.Chains))
		return nil
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(stderr, "problem:", p)
	}
	return errors.New("ledger verify: " + rep.Problems[0].String())
}

func printChains(stdout io.Writer, rep *ledger.VerifyReport) {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tID\tEVENTS\tCHAIN HEAD")
	for _, c := range rep.Chains {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", dash(c.Name), c.ProjectID, c.Events, hex.EncodeToString(c.Head))
	}
	tw.Flush()
	for _, c := range rep.Chains {
		if c.From > 0 {
			fmt.Fprintf(stdout, "%s: the events up to %d were dropped by compaction; its chain starts at the snapshot there\n", dash(c.Name), c.From)
		}
	}
}

// runVerifyBundle is `scv ledger verify --bundle FILE`: no database, only
// the bundle; exit 0 when it is intact, else 1 naming the first problem.
func runVerifyBundle(file string, heads headFlags, stdout, stderr io.Writer) error {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("ledger verify: %w", err)
		}
		defer f.Close()
		r = f
	}
	rep, err := ledger.VerifyBundle(r, heads)
	if err != nil {
		return err
	}
	printChains(stdout, rep)
	if len(rep.Problems) == 0 {
		fmt.Fprintf(stdout, "bundle: %d events, %d snapshots: intact\n", rep.Events, rep.Snapshots)
		return nil
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(stderr, "problem:", p)
	}
	return errors.New("ledger verify: " + rep.Problems[0].String())
}

// runExport is `scv ledger export PROJECT [-o FILE]`: write the project's
// whole history, its snapshots and a manifest as a self-verifying bundle
// (JSON Lines) to FILE or stdout, reading the database file directly.
func runExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv ledger export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDBPath(), "the ledger database `path` (env SCV_DB)")
	out := fs.String("o", "", "write the bundle to `file` instead of stdout")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{"scv ledger export: " + err.Error()}
	}
	if len(pos) != 1 {
		return usageError{"usage: scv ledger export [--db PATH] PROJECT [-o FILE]"}
	}
	ctx := context.Background()
	drv, err := openReadOnly(ctx, *db)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer drv.Close()
	w, summary := stdout, stderr // the bundle goes to stdout: say what it holds elsewhere
	var f *os.File
	if *out != "" && *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return fmt.Errorf("ledger export: %w", err)
		}
		w, summary = f, stdout
	}
	m, err := ledger.Export(ctx, drv, pos[0], w)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*out) // no half bundle
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(summary, "%s (%s): %d events, %d snapshots, sequences %d to %d, chain head %s\n",
		dash(m.Name), m.ProjectID, m.Events, m.Snapshots, m.FirstSequence, m.LastSequence, m.ChainHead)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runCopy is `scv ledger copy --from PATH --to URL`: move a ledger,
// sequences and hashes unchanged, into an empty database (a SQLite file
// into PostgreSQL, for a fleet), and verify the copy against the
// original. The source is read as it is, with no daemon writing it.
func runCopy(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv ledger copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the ledger to copy: a SQLite `path` (or a URL)")
	to := fs.String("to", "", "the empty database to copy it into: a postgres:// `URL` (or a path)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{"scv ledger copy: " + err.Error()}
	}
	if fs.NArg() > 0 || *from == "" || *to == "" {
		return usageError{"usage: scv ledger copy --from PATH --to URL"}
	}
	ctx := context.Background()
	src, err := openReadOnly(ctx, *from)
	if err != nil {
		return fmt.Errorf("ledger copy: %w", err)
	}
	defer src.Close()
	dst, err := openWritable(ctx, *to)
	if err != nil {
		return fmt.Errorf("ledger copy: %w", err)
	}
	defer dst.Close()
	var progress func(done, total int)
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		progress = func(done, total int) {
			fmt.Fprintf(f, "\rcopying: %d/%d events (%d%%)", done, total, done*100/max(total, 1))
			if done == total {
				fmt.Fprintln(f)
			}
		}
	}
	rep, err := ledger.Copy(ctx, src, dst, progress)
	if err != nil {
		return err
	}
	printChains(stdout, rep.To)
	fmt.Fprintf(stdout, "copied %d events (%d archived), %d snapshots, %d projects from %s to %s: verified, the same chains and heads\n",
		rep.Events, rep.Archived, rep.Snapshots, rep.Projects, src.Name(), dst.Name())
	return nil
}

// runLease is `scv ledger lease --db DB`: who holds the ledger-wide jobs
// (the sweeper) of a database, in which term, until when.
func runLease(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv ledger lease", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDBPath(), "the ledger database: a SQLite `path` or a postgres:// URL")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{"scv ledger lease: " + err.Error()}
	}
	ctx := context.Background()
	drv, err := openReadOnly(ctx, *db)
	if err != nil {
		return fmt.Errorf("ledger lease: %w", err)
	}
	defer drv.Close()
	var leases []driver.Lease
	if err := drv.Read(ctx, func(r driver.Reader) (err error) {
		leases, err = r.Leases(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("ledger lease: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tHOLDER\tTERM\tEXPIRES")
	for _, l := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.Name, l.Holder, l.Term, time.UnixMilli(l.ExpiresMs).Format(time.RFC3339))
	}
	return tw.Flush()
}
