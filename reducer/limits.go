package reducer

// The limits of what users send, in characters (Unicode code points) or
// entries. The MCP server's tools advertise them in their input schemas
// and leave them to the daemon to check (control/mcp).
const (
	// MaxNameLen is the longest project name, task title or agent name.
	MaxNameLen = 200
	// MaxRefLen is the longest reference to a project, task or run (its
	// ID, or its name or title), each entry of depends_on included.
	MaxRefLen = 200
	// MaxProgressLen is the longest progress text.
	MaxProgressLen = 2000
	// MaxQuestionLen is the longest question to the owner.
	MaxQuestionLen = 2000
	// MaxReasonLen is the longest reason, such as a run's end reason.
	MaxReasonLen = 2000
	// MaxDependsOn is the most entries of a task's depends_on.
	MaxDependsOn = 100
)
