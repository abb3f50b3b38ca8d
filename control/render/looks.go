package render

// look is how one status or marker kind is drawn in each output.
type look struct {
	mark, ascii string // its character in text, in Unicode and in ASCII
	sgr         string // its ANSI colour
	fill        string // its colour in SVG and DOT
	stroke      string
}

func (k look) char(o TextOptions) string {
	if o.ASCII {
		return k.ascii
	}
	return k.mark
}

var taskLooks = map[string]look{
	TaskPending: {"◌", ".", "2", "#f3f4f6", "#6b7280"},
	TaskReady:   {"○", "o", "36", "#dbeafe", "#2563eb"},
	TaskRunning: {"▶", ">", "1;33", "#fef3c7", "#d97706"},
	TaskBlocked: {"■", "#", "35", "#ede9fe", "#7c3aed"},
	TaskDone:    {"✓", "+", "32", "#dcfce7", "#16a34a"},
	TaskFailed:  {"✗", "x", "31", "#fee2e2", "#dc2626"},
	TaskStale:   {"≈", "~", "33", "#ffedd5", "#c2410c"},
	"unknown":   {"?", "?", "", "#ffffff", "#6b7280"},
}

func taskLook(status string) look { return taskLooks[statusWord(status, taskStatuses)] }

// The run looks: fill is the bar's colour.
var runLooks = map[string]look{
	RunSucceeded: {"█", "=", "32", "#16a34a", "#14532d"},
	RunFailed:    {"✗", "x", "31", "#dc2626", "#7f1d1d"},
	RunRunning:   {"▒", ">", "33", "#f59e0b", "#92400e"},
	RunCancelled: {"─", "-", "90", "#9ca3af", "#4b5563"},
	RunStale:     {"░", "~", "35", "#c2410c", "#7c2d12"},
	"unknown":    {"%", "%", "", "#6b7280", "#374151"},
}

func runLook(status string) look { return runLooks[statusWord(status, runStatuses)] }

var gapLook = look{"┈", ".", "2", "#ffffff", "#6b7280"}

var markerLooks = map[string]look{
	MarkerStale:           {"!", "!", "1;31", "#b91c1c", "#7f1d1d"},
	MarkerApprovalAsked:   {"?", "?", "1;36", "#2563eb", "#1e3a8a"},
	MarkerApprovalYes:     {"✔", "Y", "1;32", "#16a34a", "#14532d"},
	MarkerApprovalNo:      {"⊘", "N", "1;31", "#dc2626", "#7f1d1d"},
	MarkerApprovalExpired: {"∅", "E", "2", "#6b7280", "#374151"},
	MarkerRetry:           {"↻", "R", "1;33", "#d97706", "#78350f"},
	MarkerFound:           {"✚", "F", "1;34", "#0891b2", "#164e63"},
	"other":               {"◇", "^", "1", "#374151", "#111827"},
}

func markerLook(kind string) look {
	if k, ok := markerLooks[kind]; ok {
		return k
	}
	return markerLooks["other"]
}

// Words for the legends.
var markerNames = map[string]string{
	MarkerStale:           "stale mark",
	MarkerApprovalAsked:   "approval asked",
	MarkerApprovalYes:     "approved",
	MarkerApprovalNo:      "refused",
	MarkerApprovalExpired: "approval expired",
	MarkerRetry:           "retry",
	MarkerFound:           "work found",
	"other":               "other marker",
}

// wordSGR is the ANSI colour of a status word in text: a task's or a
// run's as the drawings colour it, and the other statuses the command
// line shows (a project's, a question's, a chat's, a check's) by what
// they mean: well (green), failed (red), under way (yellow), held back
// (magenta), ready (cyan), out of play (dim). "" for any other word.
func wordSGR(word string) string {
	if word == "unknown" {
		return ""
	}
	if l, ok := taskLooks[word]; ok {
		return l.sgr
	}
	if l, ok := runLooks[word]; ok {
		return l.sgr
	}
	return wordSGRs[word]
}

var wordSGRs = map[string]string{
	"completed": "32", "yes": "32", "connected": "32", "ok": "32", "intact": "32", "production": "32",
	"no": "31", "expired": "31",
	"waiting_approval": "33", "starting": "33", "reconnecting": "33",
	"withdrawn": "35",
	"active":    "36",
	"disabled":  "2", "archived": "2",
}
