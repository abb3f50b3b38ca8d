package render

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// GraphDOT writes p's task graph in Graphviz's DOT language: one node
// statement per task (its ID quoted, its title, status, plan and attempts
// as label, coloured by status), then one edge statement per dependency,
// from the dependency to the dependant, in the order of Graph.Edges, and
// one dotted edge of class "found" from the task of a run to each task
// found during it.
// Every string is quoted and escaped, so no title can end a statement.
func GraphDOT(w io.Writer, p Project) error {
	ix := indexTasks(p.Tasks)
	var b bytes.Buffer
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(heading(p)))
	b.WriteString("\tgraph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, label=" + dotQuote("task graph of "+heading(p)) + "];\n")
	b.WriteString("\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("\tedge [color=\"#9ca3af\", arrowsize=0.7];\n")
	for _, t := range p.Tasks {
		st := statusWord(t.Status, taskStatuses)
		k := taskLooks[st]
		label := dotEscape(clean(t.Title)) + `\n` + dotEscape(clean(t.Status)+" · "+metaText(t))
		fmt.Fprintf(&b, "\t%s [label=\"%s\", fillcolor=\"%s\", color=\"%s\", class=\"status-%s\"];\n",
			dotQuote(t.ID), label, k.fill, k.stroke, st)
	}
	for i, t := range p.Tasks {
		for _, d := range ix.deps[i] {
			fmt.Fprintf(&b, "\t%s -> %s;\n", dotQuote(p.Tasks[d].ID), dotQuote(t.ID))
		}
	}
	for _, t := range p.Tasks {
		if _, ok := ix.byID[t.FoundIn]; ok && t.FoundIn != t.ID {
			fmt.Fprintf(&b, "\t%s -> %s [style=dotted, color=\"#0891b2\", constraint=false, class=\"found\"];\n", dotQuote(t.FoundIn), dotQuote(t.ID))
		}
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// dotQuote is s as a DOT quoted string.
func dotQuote(s string) string { return `"` + dotEscape(s) + `"` }

// dotEscape escapes s for the inside of a DOT quoted string: a backslash
// and a quote are preceded by a backslash, so Graphviz shows them as they
// are and reads no escape sequence (\N, \G, \l ...) from the text; line
// breaks become spaces.
func dotEscape(s string) string { return dotEscaper.Replace(s) }

var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ", "\r", " ")
