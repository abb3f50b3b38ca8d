package reducer

import (
	"cmp"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The limits of what users send: every text and list a command carries,
// in characters (Unicode code points) or entries. Decide checks them
// (checkShape, first of all), so that a command past one is refused
// ErrInvalidArgument whichever door it came in by; Evolve never checks
// them again, so a history written under older limits still replays.
// The MCP server's tools advertise them in their input schemas and leave
// them to the daemon to check (control/mcp).
//
// The limits of the machine's own state live with it: a chat account's
// name in control/api (MaxAccount, ParseChat), a delegation's handle in
// control/delegations, a live agent's name in control/agents.
const (
	// MaxNameLen is the longest project name, task title or agent name.
	MaxNameLen = 200
	// MaxRefLen is the longest reference to a project, task or run (its
	// ID, or its name or title), each entry of depends_on included. No
	// name is longer, so a longer reference names nothing.
	MaxRefLen = 200
	// MaxProgressLen is the longest progress text, of a run
	// (ProgressRun) or of a task (UpdateTask).
	MaxProgressLen = 2000
	// MaxQuestionLen is the longest question to the owner.
	MaxQuestionLen = 2000
	// MaxReasonLen is the longest reason: a run's end reason, a
	// refusal's reason, wherever one is taken. A reason is recorded as
	// progress (a run's end reason is its last progress), so it follows
	// the progress rule and is no longer.
	MaxReasonLen = MaxProgressLen
	// MaxDependsOn is the most entries of a task's depends_on.
	MaxDependsOn = 100
	// MaxDescriptionLen is the longest description of a task, markdown.
	MaxDescriptionLen = 20000
	// MaxAcceptanceLen is the longest acceptance text of a task: how to
	// tell it is done.
	MaxAcceptanceLen = 4000
	// MaxLabelLen is the longest label; MaxLabels the most labels of a
	// task.
	MaxLabelLen = 50
	MaxLabels   = 20
	// MaxPlanKeyLen is the longest key of a task in a plan file.
	MaxPlanKeyLen = MaxRefLen
	// MaxPlanTasks is the most tasks of one plan file.
	MaxPlanTasks = 1000
	// MaxEventsPage is the most events one read of a project's history
	// returns: a project_events reply, a page of the ledger's.
	MaxEventsPage = 1000
)

// checkShape checks what of c needs no project state: its references,
// texts and lists. Decide calls it first, so that c is refused the same
// way whether or not the project it names exists.
func checkShape(c Command) error {
	if _, create := c.(CreateProject); !create {
		if err := ValidRef("project", c.ProjectRef()); err != nil {
			return err
		}
	}
	switch c := c.(type) {
	case CreateProject:
		return ValidName("name", c.Name)
	case AddTask, EditTask, ApplyPlan, NextTask:
		return checkPlanCommand(c)
	case UpdateTask:
		if c.Progress != nil {
			return cmp.Or(ValidRef("task", c.TaskID), ValidProgress(*c.Progress))
		}
		return ValidRef("task", c.TaskID)
	case StartRun:
		return cmp.Or(ValidRef("task", c.TaskID), ValidName("agent", c.Agent))
	case ProgressRun:
		return cmp.Or(ValidRef("run", c.RunID), ValidProgress(c.Progress), validUsage(c.Usage))
	case FinishRun:
		return cmp.Or(ValidRef("run", c.RunID), validUsage(c.Usage))
	case RecordHeartbeat:
		return cmp.Or(ValidRef("task", c.TaskID), ValidRef("run", c.RunID), validUsage(c.Usage))
	case RetryTask:
		return ValidRef("task", c.TaskID)
	case AskApproval:
		return cmp.Or(ValidRef("task", c.TaskID), ValidQuestion(c.Question))
	}
	return nil
}

// ValidName checks a project name, task title or agent name: 1 to
// MaxNameLen characters of valid UTF-8, not only white space, with no
// control characters.
func ValidName(field, v string) error {
	return cmp.Or(notBlank(field, v), validText(field, v, MaxNameLen, ""))
}

// ValidRef checks a reference to a project, task or run (field says
// which): at most MaxRefLen characters. Whether it names anything is the
// project's to say.
func ValidRef(field, ref string) error { return tooLong(field, ref, MaxRefLen) }

// ValidQuestion checks a question to the owner, of a project's approval
// or not: 1 to MaxQuestionLen characters of valid UTF-8, not only white
// space, with no control characters but newlines.
func ValidQuestion(q string) error {
	return cmp.Or(notBlank("question", q), validText("question", q, MaxQuestionLen, "\n"))
}

// ValidProgress checks a progress text: at most MaxProgressLen characters
// of valid UTF-8 with no control characters but newlines and tabs (a
// tool's output has them; a screen shows a tab as a space). It may be
// empty.
func ValidProgress(s string) error { return validText("progress", s, MaxProgressLen, progressControls) }

// progressControls are the control characters a progress text may hold.
const progressControls = "\n\t"

// ClipProgress makes s a progress text that ValidProgress accepts, for
// text the daemon makes itself (a live agent's turn), which is cut rather
// than refused: bytes that are not UTF-8 become U+FFFD, the control
// characters ValidProgress refuses become spaces, and a text of more than
// MaxProgressLen characters is cut to MaxProgressLen, its last one "…".
func ClipProgress(s string) string { return clipText(s, MaxProgressLen, progressControls) }

// clipText is s made valid text of at most max characters with no control
// characters but those of controls, as ClipProgress does.
func clipText(s string, max int, controls string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !strings.ContainsRune(controls, r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= max || utf8.RuneCountInString(s) <= max {
		return s
	}
	i, n := 0, 0
	for n < max-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return s[:i] + "…"
}

// validDeps checks depends_on: at most MaxDependsOn entries, each a
// reference.
func validDeps(deps []string) error {
	if len(deps) > MaxDependsOn {
		return fmt.Errorf("%w: depends_on has %d entries, more than %d", ErrInvalidArgument, len(deps), MaxDependsOn)
	}
	for i, d := range deps {
		if len(d) > MaxRefLen { // else short enough: no field name to make
			if err := ValidRef(fmt.Sprintf("depends_on[%d]", i), d); err != nil {
				return err
			}
		}
	}
	return nil
}

// notBlank refuses an empty text, or one of only white space.
func notBlank(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, field)
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%w: %s is only white space", ErrInvalidArgument, field)
	}
	return nil
}

// validText checks a text of at most max characters: valid UTF-8 with no
// control characters but those of controls. The refusal names field and
// never quotes the text.
func validText(field, s string, max int, controls string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, field)
	}
	if err := tooLong(field, s, max); err != nil {
		return err
	}
	for _, r := range s {
		if unicode.IsControl(r) && !strings.ContainsRune(controls, r) {
			return fmt.Errorf("%w: %s contains control character %U", ErrInvalidArgument, field, r)
		}
	}
	return nil
}

// tooLong refuses s, named field, when it has more than max characters.
func tooLong(field, s string, max int) error {
	if len(s) <= max { // never more characters than bytes
		return nil
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("%w: %s is %d characters, more than %d", ErrInvalidArgument, field, n, max)
	}
	return nil
}
