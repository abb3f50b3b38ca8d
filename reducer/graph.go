package reducer

import (
	"fmt"
	"slices"
	"strings"
)

// graph is what a task waits for, as a command would leave a project:
// the parent and dependencies of the tasks it places override the
// project's. Each task is two nodes, its start and its done: a task
// starts after its epic starts and its dependencies are done; it is done
// after it starts and, for an epic, after each child is done. A command
// whose graph has a cycle would leave tasks that wait for themselves.
type graph struct {
	p      *Project
	parent map[string]string
	deps   map[string][]string
	gained map[string][]string // epic ID -> the tasks placed under it
	moved  map[string]bool     // tasks placed under another epic, or none
}

func newGraph(p *Project) *graph {
	return &graph{p: p, parent: map[string]string{}, deps: map[string][]string{}, gained: map[string][]string{}, moved: map[string]bool{}}
}

// place sets task id's parent and dependencies; was is its parent now
// ("" for a new task).
func (g *graph) place(id, parent string, deps []string, was string) {
	g.parent[id], g.deps[id] = parent, deps
	if parent != was {
		g.moved[id] = true
		if parent != "" {
			g.gained[parent] = append(g.gained[parent], id)
		}
	}
}

func (g *graph) parentOf(id string) string {
	if v, ok := g.parent[id]; ok {
		return v
	}
	if t, ok := g.p.Task(id); ok {
		return t.Parent
	}
	return ""
}

func (g *graph) depsOf(id string) []string {
	if v, ok := g.deps[id]; ok {
		return v
	}
	if t, ok := g.p.Task(id); ok {
		return t.DependsOn
	}
	return nil
}

func (g *graph) childrenOf(id string) []string {
	var out []string
	for _, i := range g.p.childrenOf(id) {
		if c := g.p.tasks.Get(i).ID; !g.moved[c] {
			out = append(out, c)
		}
	}
	return append(out, g.gained[id]...)
}

// gnode is a task's start (done false) or its done.
type gnode struct {
	id   string
	done bool
}

// next is what n waits for.
func (g *graph) next(n gnode) []gnode {
	var out []gnode
	if !n.done {
		if e := g.parentOf(n.id); e != "" {
			out = append(out, gnode{e, false})
		}
		for _, d := range g.depsOf(n.id) {
			out = append(out, gnode{d, true})
		}
		return out
	}
	out = append(out, gnode{n.id, false})
	for _, c := range g.childrenOf(n.id) {
		out = append(out, gnode{c, true})
	}
	return out
}

// acyclic refuses a cycle through the tasks ids (those the command
// placed: the project had none before), naming its tasks with name.
func (g *graph) acyclic(ids []string, name func(string) string) error {
	state := map[gnode]uint8{} // 1 on the path, 2 done with
	var path []gnode
	var visit func(n gnode) []gnode
	visit = func(n gnode) []gnode {
		state[n] = 1
		path = append(path, n)
		for _, m := range g.next(n) {
			switch state[m] {
			case 1:
				i := slices.Index(path, m)
				return append(slices.Clone(path[i:]), m)
			case 0:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		return nil
	}
	for _, id := range ids {
		for _, n := range []gnode{{id, false}, {id, true}} {
			if state[n] != 0 {
				continue
			}
			if c := visit(n); c != nil {
				return cycleError(c, name)
			}
		}
	}
	return nil
}

// cycleError names the tasks of cycle c, each once in a row.
func cycleError(c []gnode, name func(string) string) error {
	var names []string
	for i, n := range c {
		if i == 0 || c[i-1].id != n.id {
			names = append(names, name(n.id))
		}
	}
	return fmt.Errorf("%w: parent and depends_on make a cycle: %s", ErrInvalidArgument, strings.Join(names, " waits for "))
}
