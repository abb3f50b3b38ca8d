package render

import (
	"strconv"
	"strings"
)

// maxTipDescription is the most characters of a task's description a
// tooltip shows.
const maxTipDescription = 280

// planText is what the drawings say of a task's plan beside its title:
// its priority ("P1") when set, and an epic's progress ("epic 2/5
// done"); "" for neither.
func planText(t Task) string {
	var parts []string
	if t.Priority != nil {
		parts = append(parts, "P"+strconv.Itoa(*t.Priority))
	}
	if t.Children > 0 {
		parts = append(parts, "epic "+strconv.Itoa(t.ChildrenDone)+"/"+strconv.Itoa(t.Children)+" done")
	}
	return strings.Join(parts, ", ")
}

// metaText is the graph's words of a task after its title: its plan,
// then its attempts and retries (an epic has none: it never runs).
func metaText(t Task) string {
	plan := planText(t)
	switch {
	case t.Children > 0:
		return plan
	case plan != "":
		return plan + ", " + attemptsText(t)
	}
	return attemptsText(t)
}

// planLinks is how a task names its epic and the task it was found in,
// each by title(id): "in epic …", "found in …".
func planLinks(t Task, title func(id string) string) []string {
	var links []string
	if t.Parent != "" {
		links = append(links, "in epic "+title(t.Parent))
	}
	if t.FoundIn != "" {
		links = append(links, "found in "+title(t.FoundIn))
	}
	return links
}

// planTip is the lines a tooltip adds for a task's plan: its links, then
// its description, cut; "" for none.
func planTip(t Task, title func(id string) string) string {
	lines := planLinks(t, title)
	if t.FoundRun != "" && t.FoundIn != "" {
		lines[len(lines)-1] += " (run " + t.FoundRun + ")"
	}
	if d := clean(strings.Join(strings.Fields(t.Description), " ")); d != "" {
		lines = append(lines, cut(d, maxTipDescription, "…"))
	}
	return strings.Join(lines, "\n")
}
