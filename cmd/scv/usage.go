package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/render"
	"scv/reducer"
)

// What the work costs (docs/usage.md): the usage flags of `project run
// progress|finish`, `scv project budget`, and how spend is shown.

// usageFlags are a run's usage on the command line: what it spent so far.
type usageFlags struct {
	tokens      reducer.Tokens
	cost, model string
}

// usageFlagNames are the flags add defines.
var usageFlagNames = []string{"tokens-in", "tokens-out", "tokens-thought", "tokens-cached-read", "tokens-cached-write", "cost", "model"}

// add defines the usage flags on cmd.
func (u *usageFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Uint64Var(&u.tokens.Input, "tokens-in", 0, "usage: the run's input tokens so far (`N`)")
	f.Uint64Var(&u.tokens.Output, "tokens-out", 0, "usage: the run's output tokens so far (`N`)")
	f.Uint64Var(&u.tokens.Thought, "tokens-thought", 0, "usage: the run's thought tokens so far (`N`)")
	f.Uint64Var(&u.tokens.CachedRead, "tokens-cached-read", 0, "usage: the run's tokens read from a cache so far (`N`)")
	f.Uint64Var(&u.tokens.CachedWrite, "tokens-cached-write", 0, "usage: the run's tokens written to a cache so far (`N`)")
	f.StringVar(&u.cost, "cost", "", "usage: the run's cost so far, an amount and a currency (`COST`, as 0.42USD)")
	f.StringVar(&u.model, "model", "", "usage: the `MODEL` the run used")
}

// usage is the usage the flags name, nil when none is set.
func (u *usageFlags) usage(cmd *cobra.Command) (*reducer.Usage, error) {
	set := false
	for _, n := range usageFlagNames {
		set = set || cmd.Flags().Changed(n)
	}
	if !set {
		return nil, nil
	}
	out := &reducer.Usage{Tokens: u.tokens, Model: u.model}
	if cmd.Flags().Changed("cost") {
		c, err := reducer.ParseCost(u.cost)
		if err != nil {
			return nil, usagef("--cost: %s", strings.TrimPrefix(err.Error(), reducer.ErrInvalidArgument.Error()+": "))
		}
		out.Cost = &c
	}
	return out, nil
}

// ProjectBudgetOptions is `scv project budget`.
type ProjectBudgetOptions struct {
	c       *client
	Project string
	Tokens  uint64
	Cost    string
	Clear   bool
	set     func(string) bool
}

func newProjectBudgetCmd(c *client) *cobra.Command {
	o := &ProjectBudgetOptions{c: c}
	cmd := &cobra.Command{
		Use:   "budget PROJECT [--tokens N] [--cost COST] [--clear]",
		Short: "Show or set what a project may spend: tokens, cost",
		Long: `Without flags, show what PROJECT spent (tokens by kind, cost per currency)
against its budget. With --tokens and --cost, set the budget to those
limits (a limit not given is none); --clear removes it. Setting it is the
owner's decision: the project records who set it.

Once the project's spend reaches the budget (its tokens of every kind
together, or its cost in the budget's currency), no new run starts: a
run start is refused [budget_reached]; a run under way may finish.
Raising or removing the budget lets work go on.`,
		Example: `  scv project budget acme
  scv project budget acme --tokens 2000000 --cost 25USD
  scv project budget acme --clear`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.set = args[0], cmd.Flags().Changed
			return o.run()
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&o.Tokens, "tokens", 0, "the most tokens (of every kind together) the project may spend (`N`)")
	f.StringVar(&o.Cost, "cost", "", "the most the project may cost (`COST`, an amount and a currency, as 25USD)")
	f.BoolVar(&o.Clear, "clear", false, "remove the budget")
	return cmd
}

func (o *ProjectBudgetOptions) run() error {
	limits := o.set("tokens") || o.set("cost")
	if o.Clear && limits {
		return usagef("--clear goes without --tokens and --cost")
	}
	if !o.Clear && !limits {
		_, err := o.c.call(api.CmdProjectStatus{Project: o.Project}, func(p *printer, st *api.DaemonStatus) error {
			r, err := projectOf(st, api.KindStatus)
			if err != nil {
				return err
			}
			return printSpendBlock(p, r.Spend)
		})
		return err
	}
	c := api.CmdProjectBudget{Project: o.Project}
	if o.set("tokens") {
		c.Tokens = &o.Tokens
	}
	if o.set("cost") {
		k, err := reducer.ParseCost(o.Cost)
		if err != nil {
			return usagef("--cost: %s", strings.TrimPrefix(err.Error(), reducer.ErrInvalidArgument.Error()+": "))
		}
		s := k.String()
		c.Cost = &s
	}
	headline := "budget removed"
	if limits {
		headline = "budget set: " + budgetText(&reducer.Budget{Tokens: c.Tokens, Cost: costOrNil(c.Cost)})
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error { return printProjectBlock(p, st, headline) })
	return err
}

func costOrNil(s *string) *reducer.Cost {
	if s == nil {
		return nil
	}
	k, _ := reducer.ParseCost(*s)
	return &k
}

// printSpendBlock writes a project's spend by kind and currency, its
// budget and whether it is reached.
func printSpendBlock(p *printer, s *api.ProjectSpend) error {
	if s == nil {
		s = &api.ProjectSpend{}
	}
	t := render.Block()
	k := s.Spend.Tokens
	t.Add("tokens", fmt.Sprintf("%d (input %d, output %d, thought %d, cached read %d, cached write %d)",
		k.Total(), k.Input, k.Output, k.Thought, k.CachedRead, k.CachedWrite))
	t.Add("cost", costsText(s.Spend.Cost))
	t.Add("budget", budgetText(s.Budget))
	if s.BudgetReached != "" {
		t.Add("reached", s.BudgetReached+": no new run starts")
	}
	return p.table(t)
}

// spendText is a spend on one line; "-" for none.
func spendText(s *reducer.Spend) string {
	if s == nil {
		return "-"
	}
	return s.String()
}

// usageText is a run's usage on one line; "-" for none.
func usageText(u *reducer.Usage) string {
	if u == nil {
		return "-"
	}
	return u.Spend().String()
}

// costsText is costs on one line; "-" for none.
func costsText(cs []reducer.Cost) string {
	if len(cs) == 0 {
		return "-"
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return strings.Join(out, ", ")
}

// budgetText is a budget on one line; "none" for none.
func budgetText(b *reducer.Budget) string {
	if b == nil {
		return "none"
	}
	return b.String()
}

// spendLine is the line under a table of tasks: the total against the
// budget; "" when nothing was spent and there is no budget.
func spendLine(s *api.ProjectSpend) string {
	if s == nil {
		return ""
	}
	line := fmt.Sprintf("spent %s of a budget of %s", spendText(&s.Spend), budgetText(s.Budget))
	if s.Budget == nil {
		line = fmt.Sprintf("spent %s, no budget", spendText(&s.Spend))
	}
	if s.BudgetReached != "" {
		line += " (budget reached: no new run starts)"
	}
	return line
}
