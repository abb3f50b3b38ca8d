package reducer

import (
	"fmt"
	"slices"
)

// decideApplyPlan decides a plan file, all or nothing: a task_added event
// for each item whose key matches no task, a task_edited event for each
// whose task differs, in an order where each task comes after its epic
// and its dependencies among the plan's; nothing for an item its task
// already matches, so that the same plan applied again appends nothing.
// An item matches the task whose Key is its key, else the task whose ID
// is its key (an exported plan names key-less tasks by ID).
func decideApplyPlan(p *Project, c ApplyPlan) ([]Event, error) {
	n := len(c.Items)
	item := make(map[string]int, n) // key -> index in c.Items
	ids := make([]string, n)
	tasks := make([]*Task, n) // the task each item matches, nil for a new one
	matchedBy := map[string]string{}
	for i, it := range c.Items {
		if j, dup := item[it.Key]; dup {
			return nil, fmt.Errorf("%w: plan task %q: the key is also task %d's", ErrInvalidArgument, it.Key, j+1)
		}
		item[it.Key] = i
		t, ok := p.TaskByKey(it.Key)
		if !ok {
			t, ok = p.Task(it.Key)
		}
		switch {
		case ok && matchedBy[t.ID] != "":
			return nil, fmt.Errorf("%w: plan tasks %q and %q are both task %s", ErrInvalidArgument, matchedBy[t.ID], it.Key, t.ID)
		case ok:
			tasks[i], ids[i], matchedBy[t.ID] = t, t.ID, it.Key
		default:
			if _, taken := p.Task(c.IDs[i]); taken {
				return nil, fmt.Errorf("%w: task ID %s exists", ErrConflict, c.IDs[i])
			}
			ids[i] = c.IDs[i]
		}
	}
	resolve := func(key string) (string, error) {
		if j, ok := item[key]; ok {
			return ids[j], nil
		}
		if t, ok := p.TaskByKey(key); ok {
			return t.ID, nil
		}
		if t, ok := p.Task(key); ok {
			return t.ID, nil
		}
		return "", fmt.Errorf("%w: %q is the key of no task of the plan or of project %s", ErrInvalidArgument, key, p.Name)
	}
	name := func(id string) string {
		if k, ok := matchedBy[id]; ok {
			return fmt.Sprintf("%q", k)
		}
		if j := slices.Index(ids, id); j >= 0 {
			return fmt.Sprintf("%q", c.Items[j].Key)
		}
		return p.taskName(id)
	}

	g := newGraph(p)
	bodies := make([]Body, n)
	for i, it := range c.Items {
		refuse := func(err error) ([]Event, error) { return nil, fmt.Errorf("plan task %q: %w", it.Key, err) }
		parent := ""
		if it.Parent != "" {
			id, err := resolve(it.Parent)
			if err != nil {
				return refuse(fmt.Errorf("parent: %w", err))
			}
			if id == ids[i] {
				return refuse(fmt.Errorf("%w: parent: a task cannot be its own parent", ErrInvalidArgument))
			}
			parent = id
		}
		deps, err := resolveDeps(it.DependsOn, ids[i], resolve)
		if err != nil {
			return refuse(err)
		}
		t := tasks[i]
		was := ""
		if t != nil {
			was = t.Parent
		}
		if e, ok := p.Task(parent); ok && parent != was {
			if err := canAdopt(e); err != nil {
				return refuse(err)
			}
		}
		labels := normLabels(it.Labels)
		if t == nil {
			ev := TaskAdded{TaskID: ids[i], Title: it.Title, DependsOn: deps, Key: it.Key, Description: it.Description,
				Acceptance: it.Acceptance, Priority: changed(it.Priority, -1), Parent: parent, By: c.By}
			if len(labels) > 0 {
				ev.Labels = labels
			}
			bodies[i] = ev
			g.place(ids[i], parent, deps, "")
			continue
		}
		priority := cmpOr(it.Priority, DefaultPriority)
		if len(labels) == 0 {
			labels = nil
		}
		f := planFields{title: &it.Title, description: &it.Description, acceptance: &it.Acceptance, priority: &priority,
			labels: &labels, parent: &parent, dependsOn: &deps}
		if ev, any := f.diff(t, c.By); any {
			bodies[i] = ev
			if ev.Parent != nil || ev.DependsOn != nil {
				g.place(t.ID, parent, deps, t.Parent)
			}
		}
	}
	if err := g.acyclic(ids, name); err != nil {
		return nil, err
	}

	// Each item after the items it names (its epic, its dependencies),
	// else in the plan's order. The graph has no cycle, so neither has
	// this.
	var evs []Event
	seen := make([]bool, n)
	var emit func(i int)
	emit = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, ref := range append([]string{c.Items[i].Parent}, c.Items[i].DependsOn...) {
			if j, ok := item[ref]; ok {
				emit(j)
			}
		}
		if bodies[i] != nil {
			evs = append(evs, Event{ProjectID: p.ID, Time: c.Now, Body: bodies[i]})
		}
	}
	for i := range c.Items {
		emit(i)
	}
	return evs, nil
}

// cmpOr is *v, or or when v is nil.
func cmpOr[T any](v *T, or T) T {
	if v == nil {
		return or
	}
	return *v
}
