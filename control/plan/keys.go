package plan

import (
	"strconv"
	"strings"
	"unicode"
)

// Listed is a task of a project as FromTasks takes it: the ledger's ID
// and the file's fields, where Key may be empty and Parent and DependsOn
// name other tasks by ID.
type Listed struct {
	ID string
	Task
}

// FromTasks makes the plan file of a project's tasks, in their order:
// each task without a key gets one (AssignKeys), and Parent and
// DependsOn name tasks by key. A reference to an ID not among tasks is
// kept as it is.
func FromTasks(tasks []Listed) *File {
	f := &File{Version: Version}
	if len(tasks) == 0 {
		return f
	}
	f.Tasks = make([]Task, len(tasks))
	for i, t := range tasks {
		f.Tasks[i] = t.Task
	}
	AssignKeys(f.Tasks)
	keyOf := make(map[string]string, len(tasks))
	for i, t := range tasks {
		keyOf[t.ID] = f.Tasks[i].Key
	}
	key := func(id string) string {
		if k, ok := keyOf[id]; ok {
			return k
		}
		return id
	}
	for i := range f.Tasks {
		t := &f.Tasks[i]
		if t.Parent != "" {
			t.Parent = key(t.Parent)
		}
		if t.DependsOn != nil {
			deps := make([]string, len(t.DependsOn))
			for j, d := range t.DependsOn {
				deps[j] = key(d)
			}
			t.DependsOn = deps
		}
	}
	return f
}

// maxDerivedKey is the most characters of a key made from a title,
// before a suffix that makes it unique.
const maxDerivedKey = 40

// AssignKeys gives each of tasks without a Key one made from its title:
// its letters and digits in lower case, each run of anything else one
// '-', cut to 40 characters ("task" when nothing is left), and "-2",
// "-3"... after it when an earlier task or any task's own key has it.
// The same tasks in the same order get the same keys.
func AssignKeys(tasks []Task) {
	taken := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		if t.Key != "" {
			taken[t.Key] = true
		}
	}
	for i := range tasks {
		if tasks[i].Key != "" {
			continue
		}
		base := slug(tasks[i].Title)
		key := base
		for n := 2; taken[key]; n++ {
			key = base + "-" + strconv.Itoa(n)
		}
		taken[key] = true
		tasks[i].Key = key
	}
}

// slug is title as a key (see AssignKeys).
func slug(title string) string {
	var b strings.Builder
	n, dash := 0, false
	for _, r := range strings.ToLower(title) {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			dash = true
			continue
		}
		if dash && n > 0 {
			b.WriteByte('-')
			n++
		}
		if n >= maxDerivedKey {
			break
		}
		b.WriteRune(r)
		n++
		dash = false
	}
	if n == 0 {
		return "task"
	}
	return strings.TrimRight(b.String(), "-")
}
