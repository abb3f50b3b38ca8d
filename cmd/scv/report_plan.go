package main

import (
	"fmt"
	"strings"

	"scv/control/api"
	"scv/control/render"
)

// printReportPlan writes the report's plan section: each task with a
// description, an acceptance or found during a run, its title, where it
// was found, then its description and acceptance, a line at a time,
// indented. Nothing when no task has any (a seed report stays the
// seed's).
func printReportPlan(p *printer, rep *api.ProjectReport) {
	names := taskNames(rep.Tasks)
	runTask := map[string]string{}
	for _, r := range rep.Runs {
		runTask[r.ID] = r.TaskID
	}
	header := false
	for _, t := range rep.Tasks {
		if t.Description == "" && t.Acceptance == "" && t.DiscoveredFrom == "" {
			continue
		}
		if !header {
			fmt.Fprintln(p.w, "\nPlan:")
			header = true
		}
		line := "  " + render.Clean(names.of(t.ID))
		if t.DiscoveredFrom != "" {
			line += ": found during run " + t.DiscoveredFrom
			if task, ok := runTask[t.DiscoveredFrom]; ok {
				line += " of " + render.Clean(names.of(task))
			}
		}
		fmt.Fprintln(p.w, line)
		for l := range strings.SplitSeq(strings.TrimSpace(t.Description), "\n") {
			if l != "" {
				fmt.Fprintln(p.w, "    "+render.Clean(l))
			}
		}
		if t.Acceptance != "" {
			fmt.Fprintln(p.w, "    acceptance: "+render.Clean(t.Acceptance))
		}
	}
}
