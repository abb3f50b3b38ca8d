package reducer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// The decisions of the plan's commands (plan.go): AddTask's plan fields,
// EditTask, ApplyPlan and NextTask, and the checks they share.

// planFields are a task's plan fields as a command sets them, its
// references resolved to IDs: nil is "not set".
type planFields struct {
	title, description, acceptance *string
	priority                       *int
	labels                         *[]string
	parent, discoveredFrom         *string
	dependsOn                      *[]string
}

// diff is the task_edited event that makes t's fields f, and whether it
// changes anything.
func (f planFields) diff(t *Task, by string) (TaskEdited, bool) {
	ev := TaskEdited{TaskID: t.ID, By: by}
	ev.Title = changed(f.title, t.Title)
	ev.Description = changed(f.description, t.Description)
	ev.Acceptance = changed(f.acceptance, t.Acceptance)
	ev.Priority = changed(f.priority, t.Priority)
	ev.Parent = changed(f.parent, t.Parent)
	ev.DiscoveredFrom = changed(f.discoveredFrom, t.DiscoveredFrom)
	if f.labels != nil && !slices.Equal(*f.labels, t.Labels) {
		ev.Labels = f.labels
	}
	if f.dependsOn != nil && !slices.Equal(*f.dependsOn, t.DependsOn) {
		ev.DependsOn = f.dependsOn
	}
	return ev, ev.Title != nil || ev.Description != nil || ev.Acceptance != nil || ev.Priority != nil ||
		ev.Parent != nil || ev.DiscoveredFrom != nil || ev.Labels != nil || ev.DependsOn != nil
}

// changed is v when it is set and differs from was, else nil.
func changed[T comparable](v *T, was T) *T {
	if v == nil || *v == was {
		return nil
	}
	c := *v
	return &c
}

// checkPlanShape checks the plan's fields of a command: its texts,
// priority, labels and references.
func checkPlanShape(description, acceptance *string, priority *int, labels []string, refs ...string) error {
	err := cmp.Or(ValidPriority(priority), ValidLabels("labels", labels))
	if description != nil {
		err = cmp.Or(err, ValidDescription(*description))
	}
	if acceptance != nil {
		err = cmp.Or(err, ValidAcceptance(*acceptance))
	}
	for i := 0; i+1 < len(refs); i += 2 {
		err = cmp.Or(err, ValidRef(refs[i], refs[i+1]))
	}
	return err
}

// ValidDescription checks a task's description: markdown of at most
// MaxDescriptionLen characters, valid UTF-8 with no control characters
// but newlines and tabs. It may be empty.
func ValidDescription(s string) error {
	return validText("description", s, MaxDescriptionLen, progressControls)
}

// ValidAcceptance checks a task's acceptance text, as ValidDescription
// does, of at most MaxAcceptanceLen characters.
func ValidAcceptance(s string) error {
	return validText("acceptance", s, MaxAcceptanceLen, progressControls)
}

// ValidPriority checks a priority: MinPriority to MaxPriority (nil is
// DefaultPriority).
func ValidPriority(p *int) error {
	if p != nil && (*p < MinPriority || *p > MaxPriority) {
		return fmt.Errorf("%w: priority is %d, not %d to %d", ErrInvalidArgument, *p, MinPriority, MaxPriority)
	}
	return nil
}

// ValidLabels checks a set of labels, field naming it: at most MaxLabels,
// each 1 to MaxLabelLen characters of valid UTF-8 with no white space, no
// control character and no comma.
func ValidLabels(field string, labels []string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%w: %s has %d entries, more than %d", ErrInvalidArgument, field, len(labels), MaxLabels)
	}
	for i, l := range labels {
		name := fmt.Sprintf("%s[%d]", field, i)
		if err := cmp.Or(notBlank(name, l), validText(name, l, MaxLabelLen, "")); err != nil {
			return err
		}
		if strings.IndexFunc(l, func(r rune) bool { return unicode.IsSpace(r) || r == ',' }) >= 0 {
			return fmt.Errorf("%w: %s %q holds white space or a comma", ErrInvalidArgument, name, l)
		}
	}
	return nil
}

// normLabels is labels sorted, without duplicates, in a slice of its own.
func normLabels(labels []string) []string {
	out := slices.Clone(labels)
	slices.Sort(out)
	return slices.Compact(out)
}

// checkPlanCommand is checkShape for the plan's commands.
func checkPlanCommand(c Command) error {
	switch c := c.(type) {
	case AddTask:
		return cmp.Or(ValidName("title", c.Title), validDeps(c.DependsOn),
			checkPlanShape(&c.Description, &c.Acceptance, c.Priority, c.Labels,
				"key", c.Key, "parent", c.Parent, "discovered_from", c.DiscoveredFrom))
	case EditTask:
		err := cmp.Or(ValidRef("task", c.TaskID), notBlank("by", c.By))
		if c.Title != nil {
			err = cmp.Or(err, ValidName("title", *c.Title))
		}
		if c.Labels != nil {
			err = cmp.Or(err, ValidLabels("labels", *c.Labels))
		}
		if c.DependsOn != nil {
			err = cmp.Or(err, validDeps(*c.DependsOn))
		}
		return cmp.Or(err, checkPlanShape(c.Description, c.Acceptance, c.Priority, nil,
			"parent", deref0(c.Parent), "discovered_from", deref0(c.DiscoveredFrom)))
	case ApplyPlan:
		if len(c.Items) > MaxPlanTasks {
			return fmt.Errorf("%w: the plan has %d tasks, more than %d", ErrInvalidArgument, len(c.Items), MaxPlanTasks)
		}
		if len(c.IDs) != len(c.Items) {
			panic("reducer: ApplyPlan without one ID per item")
		}
		for i, it := range c.Items {
			if err := cmp.Or(notBlank("key", it.Key), tooLong("key", it.Key, MaxPlanKeyLen)); err != nil {
				return fmt.Errorf("plan task %d: %w", i+1, err)
			}
			if err := cmp.Or(ValidName("title", it.Title), validDeps(it.DependsOn),
				checkPlanShape(&it.Description, &it.Acceptance, it.Priority, it.Labels, "parent", it.Parent)); err != nil {
				return fmt.Errorf("plan task %q: %w", it.Key, err)
			}
		}
		return nil
	case NextTask:
		return cmp.Or(ValidName("agent", c.Agent), ValidLabels("labels", c.Labels))
	}
	return nil
}

func deref0(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TaskByKey returns the task whose plan key is k.
func (p *Project) TaskByKey(k string) (*Task, bool) {
	i, ok := p.keys.Get(k)
	if !ok {
		return nil, false
	}
	return p.tasks.Get(i), true
}

// canAdopt refuses to make e an epic, or to give it one more child: a
// task that has run, waits for an approval or is done takes no children.
func canAdopt(e *Task) error {
	switch {
	case e.Attempts > 0:
		return fmt.Errorf("%w: parent: task %s has runs: an epic is never run itself", ErrInvalidTransition, e.ID)
	case e.Approval != "":
		return fmt.Errorf("%w: parent: task %s waits for approval %s: an epic is never run itself", ErrInvalidTransition, e.ID, e.Approval)
	case e.Status == TaskDone:
		return fmt.Errorf("%w: parent: task %s is done: add the work elsewhere", ErrInvalidTransition, e.ID)
	}
	return nil
}

// resolveDeps resolves depends_on's references to task IDs, refusing a
// task named twice and the task self itself.
func resolveDeps(refs []string, self string, resolve func(string) (string, error)) ([]string, error) {
	deps := make([]string, 0, len(refs))
	for _, ref := range refs {
		id, err := resolve(ref)
		if err != nil {
			return nil, fmt.Errorf("depends_on: %w", err)
		}
		if id == self {
			return nil, fmt.Errorf("%w: depends_on: task %s cannot depend on itself", ErrInvalidArgument, self)
		}
		if slices.Contains(deps, id) {
			return nil, fmt.Errorf("%w: depends_on names task %s twice", ErrInvalidArgument, id)
		}
		deps = append(deps, id)
	}
	return deps, nil
}

func (p *Project) resolveID(ref string) (string, error) {
	t, err := p.ResolveTask(ref)
	if err != nil {
		return "", err
	}
	return t.ID, nil
}

// resolveRun checks that run ID ref is a run of p (field names it).
func (p *Project) resolveRun(field, ref string) error {
	if _, ok := p.Run(ref); !ok {
		return fmt.Errorf("%w: %s: run %q of project %s", ErrNotFound, field, ref, p.Name)
	}
	return nil
}

func decideAddTask(p *Project, c AddTask) (Body, error) {
	if _, taken := p.Task(c.TaskID); taken {
		return nil, fmt.Errorf("%w: task ID %s exists", ErrConflict, c.TaskID)
	}
	if t, taken := p.TaskByKey(c.Key); taken && c.Key != "" {
		return nil, fmt.Errorf("%w: key %q is task %s's", ErrConflict, c.Key, t.ID)
	}
	deps, err := resolveDeps(c.DependsOn, c.TaskID, p.resolveID)
	if err != nil {
		return nil, err
	}
	ev := TaskAdded{TaskID: c.TaskID, Title: c.Title, DependsOn: deps, MaxRetries: c.MaxRetries, Key: c.Key,
		Description: c.Description, Acceptance: c.Acceptance, Priority: changed(c.Priority, -1), By: c.By}
	if len(c.Labels) > 0 {
		ev.Labels = normLabels(c.Labels)
	}
	if c.DiscoveredFrom != "" {
		if err := p.resolveRun("discovered_from", c.DiscoveredFrom); err != nil {
			return nil, err
		}
		ev.DiscoveredFrom = c.DiscoveredFrom
	}
	if c.Parent != "" {
		e, err := p.ResolveTask(c.Parent)
		if err != nil {
			return nil, fmt.Errorf("parent: %w", err)
		}
		if err := canAdopt(e); err != nil {
			return nil, err
		}
		ev.Parent = e.ID
		g := newGraph(p)
		g.place(c.TaskID, e.ID, deps, "")
		if err := g.acyclic([]string{c.TaskID}, p.taskName); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

func decideEditTask(p *Project, c EditTask) (Body, error) {
	t, err := p.ResolveTask(c.TaskID)
	if err != nil {
		return nil, err
	}
	f := planFields{title: c.Title, description: c.Description, acceptance: c.Acceptance, priority: c.Priority,
		discoveredFrom: c.DiscoveredFrom}
	if c.Labels != nil {
		l := normLabels(*c.Labels)
		f.labels = &l
	}
	if c.DiscoveredFrom != nil && *c.DiscoveredFrom != "" {
		if err := p.resolveRun("discovered_from", *c.DiscoveredFrom); err != nil {
			return nil, err
		}
	}
	if c.Parent != nil {
		parent := ""
		if *c.Parent != "" {
			e, err := p.ResolveTask(*c.Parent)
			if err != nil {
				return nil, fmt.Errorf("parent: %w", err)
			}
			if e.ID == t.ID {
				return nil, fmt.Errorf("%w: parent: task %s cannot be its own parent", ErrInvalidArgument, t.ID)
			}
			if e.ID != t.Parent {
				if err := canAdopt(e); err != nil {
					return nil, err
				}
			}
			parent = e.ID
		}
		f.parent = &parent
	}
	if c.DependsOn != nil {
		deps, err := resolveDeps(*c.DependsOn, t.ID, p.resolveID)
		if err != nil {
			return nil, err
		}
		f.dependsOn = &deps
	}
	ev, any := f.diff(t, c.By)
	if !any {
		return nil, nil
	}
	if ev.Parent != nil || ev.DependsOn != nil {
		g := newGraph(p)
		g.place(t.ID, cmpOr(f.parent, t.Parent), cmpOr(f.dependsOn, t.DependsOn), t.Parent)
		if err := g.acyclic([]string{t.ID}, p.taskName); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// taskName names task id in a refusal: its ID and title.
func (p *Project) taskName(id string) string {
	if t, ok := p.Task(id); ok {
		return fmt.Sprintf("%s (%s)", t.ID, t.Title)
	}
	return id
}

func decideNextTask(p *Project, c NextTask) (Body, error) {
	var pick *Task
	p.eachReady(c.Labels, func(t *Task) bool {
		pick = t
		return false
	})
	if pick == nil {
		return nil, fmt.Errorf("%w: %s", ErrNothingReady, p.whyNothingReady(c.Labels))
	}
	if _, taken := p.Run(c.RunID); taken {
		return nil, fmt.Errorf("%w: run ID %s exists", ErrConflict, c.RunID)
	}
	return RunStarted{RunID: c.RunID, TaskID: pick.ID, Agent: c.Agent}, nil
}

// whyNothingReady says why no task of labels is ready in p.
func (p *Project) whyNothingReady(labels []string) string {
	n, where := p.TaskCount(), "project "+p.Name
	if n == 0 {
		return where + " has no tasks"
	}
	if p.ready.Len() > 0 {
		return fmt.Sprintf("no ready task of %s has the labels %s (%s ready without them)", where, strings.Join(labels, ", "), plural(p.ready.Len(), "task"))
	}
	if p.DoneCount() == n {
		// Epics are counted apart, as the views count them (O(n), on
		// this path only).
		epics := 0
		for _, t := range p.Tasks() {
			if t.Epic() {
				epics++
			}
		}
		if epics == 0 {
			return fmt.Sprintf("all %s of %s are done", plural(n, "task"), where)
		}
		return fmt.Sprintf("all %s of %s are done, and its %s", plural(n-epics, "task"), where, plural(epics, "epic"))
	}
	var why string
	var running, stale, waiting, failed, blocked, pending int
	var firstFailed *Task
	for _, t := range p.Tasks() {
		if t.Epic() {
			continue
		}
		switch {
		case t.Status == TaskRunning:
			running++
		case t.Status == TaskStale:
			stale++
		case t.Approval != "" && !t.Status.Final():
			waiting++
		case t.Status == TaskFailed:
			failed++
			if firstFailed == nil {
				firstFailed = t
			}
		case t.Status == TaskBlocked:
			blocked++
		case t.Status == TaskPending:
			pending++
		}
	}
	switch {
	case waiting > 0:
		why = "waiting for an approval"
	case running+stale > 0 && failed+blocked == 0:
		why = "all running"
	case failed > 0:
		why = fmt.Sprintf("blocked by failed work (task %s failed)", p.taskName(firstFailed.ID))
	case blocked > 0:
		why = "blocked"
	default:
		why = "waiting for their dependencies"
	}
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{running, "running"}, {stale, "stale"}, {waiting, "waiting for an approval"}, {failed, "failed"}, {blocked, "blocked"}, {pending, "pending"}, {p.DoneCount(), "done"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return fmt.Sprintf("nothing is ready in %s: %s (%s)", where, why, strings.Join(parts, ", "))
}
