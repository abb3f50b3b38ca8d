package plan

// Listed is a task of a project as FromTasks takes it: the ledger's ID
// and the file's fields, where Key may be empty and Parent and DependsOn
// name other tasks by ID.
type Listed struct {
	ID string
	Task
}

// FromTasks makes the plan file of a project's tasks, in their order:
// each task's key is its own, or its ID when it has none (a task added
// by `scv project task add`), so that applying the file to the same
// project matches every task (the reducer matches a key to a task's key,
// else to its ID); Parent and DependsOn name tasks by key. A reference
// to an ID not among tasks is kept as it is.
func FromTasks(tasks []Listed) *File {
	f := &File{Version: Version}
	if len(tasks) == 0 {
		return f
	}
	f.Tasks = make([]Task, len(tasks))
	keyOf := make(map[string]string, len(tasks))
	for i, t := range tasks {
		f.Tasks[i] = t.Task
		if f.Tasks[i].Key == "" {
			f.Tasks[i].Key = t.ID
		}
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
