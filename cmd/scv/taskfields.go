package main

import (
	"fmt"
	"io"
	"math"

	"github.com/spf13/cobra"

	"scv/reducer"
)

// taskFieldsHelp is the part of the help of task add and task edit about
// the plan's fields of a task (docs/plan.md).
var taskFieldsHelp = fmt.Sprintf(`
The plan's fields (docs/plan.md): --description, markdown, the statement of
the work (- reads it from standard input; at most %d characters);
--acceptance, how to tell it is done (at most %d); --priority, %d the most
urgent to %d (default %d); --label, a short name (at most %d, each at most %d
characters), repeated or separated by commas; --parent, the task's epic
(a task of the same project); --discovered-from, the RUN during which the
work was found.`,
	reducer.MaxDescriptionLen, reducer.MaxAcceptanceLen, reducer.MinPriority, reducer.MaxPriority,
	reducer.DefaultPriority, reducer.MaxLabels, reducer.MaxLabelLen)

// taskFields are the flags of the plan's fields of a task, shared by
// task add and task edit: each pointer is nil when its flag is not given.
type taskFields struct {
	Description    *string
	Acceptance     *string
	Priority       *uint32
	Labels         *[]string
	Parent         *string
	DiscoveredFrom *string

	description, acceptance, parent, discoveredFrom string
	priority                                        uint64
	labelFlag                                       listFlag
}

// add declares the flags on cmd; edit says how an empty value reads.
func (f *taskFields) add(c *client, cmd *cobra.Command, edit bool) {
	fl := cmd.Flags()
	clear := func(what string) string {
		if edit {
			return what + `; "" clears it`
		}
		return what
	}
	fl.StringVar(&f.description, "description", "", clear("what the work is, markdown `TEXT` (-: read it from standard input)"))
	fl.StringVar(&f.acceptance, "acceptance", "", clear("how to tell the work is done, `TEXT`"))
	prio, prioUsage := uint64(reducer.DefaultPriority), fmt.Sprintf("`N` from %d, the most urgent, to %d", reducer.MinPriority, reducer.MaxPriority)
	if edit {
		prio, prioUsage = 0, prioUsage+" (default: kept)"
	}
	fl.Uint64Var(&f.priority, "priority", prio, prioUsage)
	labelUsage := "a label `L`; repeat it, or separate them with commas"
	if edit {
		labelUsage += "; the labels given replace the task's (--label \"\" removes them all)"
	}
	fl.Var(&f.labelFlag, "label", labelUsage)
	fl.StringVar(&f.parent, "parent", "", clear("the task's epic, a `TASK` of the same project"))
	fl.StringVar(&f.discoveredFrom, "discovered-from", "", clear("the `RUN` during which the work was found"))
	cmd.RegisterFlagCompletionFunc("parent", c.completeTaskFlag)
	cmd.RegisterFlagCompletionFunc("discovered-from", c.completeRunFlag)
}

// read sets the pointers of the flags given, the description from stdin
// for -.
func (f *taskFields) read(cmd *cobra.Command, c *client) error {
	set := cmd.Flags().Changed
	if set("description") {
		if f.description == "-" {
			r, err := c.openInput("-", "the description")
			if err != nil {
				return err
			}
			b, err := io.ReadAll(r)
			if err != nil {
				return fmt.Errorf("--description -: read standard input: %w", err)
			}
			f.description = string(b)
		}
		f.Description = &f.description
	}
	if set("acceptance") {
		f.Acceptance = &f.acceptance
	}
	if set("priority") {
		if f.priority > math.MaxUint32 {
			return usagef("--priority %d is out of range (%d to %d)", f.priority, reducer.MinPriority, reducer.MaxPriority)
		}
		n := uint32(f.priority)
		f.Priority = &n
	}
	if set("label") {
		l := f.labelFlag.list()
		f.Labels = &l
	}
	if set("parent") {
		f.Parent = &f.parent
	}
	if set("discovered-from") {
		f.DiscoveredFrom = &f.discoveredFrom
	}
	return nil
}

// labels is the labels given, nil when --label is not.
func (f *taskFields) labels() []string {
	if f.Labels == nil {
		return nil
	}
	return *f.Labels
}
