package reducer

// The plan's vocabulary (docs/plan.md): the fields a task carries beyond
// its title, the commands that set them, and a plan file's tasks as the
// reducer takes them. Their limits are with every other in limits.go.

// The priorities of a task: 0 the most urgent, 4 the least.
const (
	MinPriority     = 0
	MaxPriority     = 4
	DefaultPriority = 2
)

// EditTask changes the plan's fields of a task (the owner's or an
// agent's edit, By naming who). A nil field is kept as it is; Labels,
// when set, replaces the task's set; an empty Parent or DiscoveredFrom,
// when set, clears it.
type EditTask struct {
	Project        string
	TaskID         string // ID or unique title
	Title          *string
	Description    *string
	Acceptance     *string
	Priority       *int
	Labels         *[]string
	Parent         *string // ID or unique title of the epic; "" for none
	DiscoveredFrom *string // run ID; "" for none
	DependsOn      *[]string
	By             string
	Now            int64
}

// PlanItem is one task of a plan file, as ApplyPlan takes it: Key is the
// author's name for it, unique in the plan; Parent and DependsOn name
// other tasks by key (of this plan, or of a task an earlier plan added).
type PlanItem struct {
	Key         string
	Title       string
	Description string
	Acceptance  string
	Priority    *int // nil: DefaultPriority
	Labels      []string
	Parent      string
	DependsOn   []string
}

// ApplyPlan applies a plan file to a project, all or nothing: an item
// whose key no task has yet is added (with IDs[i] as the ID of Items[i]),
// an item whose task differs is edited, an item that matches changes
// nothing. By is who applied it.
type ApplyPlan struct {
	Project string
	Items   []PlanItem
	IDs     []string // fresh task IDs, one per item
	By      string
	Now     int64
}

// NextTask claims the project's first ready task (ReadyTasks' order),
// of those with every label in Labels, and starts its run RunID for
// Agent: one event, decided under the project's write, so that two
// claimers never get the same task.
type NextTask struct {
	Project string
	RunID   string
	Agent   string
	Labels  []string
	Now     int64
}

func (c EditTask) ProjectRef() string  { return c.Project }
func (c ApplyPlan) ProjectRef() string { return c.Project }
func (c NextTask) ProjectRef() string  { return c.Project }

func (EditTask) command()  {}
func (ApplyPlan) command() {}
func (NextTask) command()  {}
