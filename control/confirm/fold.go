package confirm

import (
	"encoding/json"
	"fmt"

	"scv/control/api"
	"scv/ledger/local"
)

// The kinds of the question log's records: the steps of a question. A
// question is asked once, then at most one of the others ends it.
const (
	KindAsked     = "asked"
	KindAnswered  = "answered"
	KindExpired   = "expired"
	KindWithdrawn = "withdrawn"
	KindFailed    = "failed"
	// KindProjected follows the decision of an approval once its project
	// has recorded it too (approval_decided): a decision without it is
	// recorded in the project again at the next start.
	KindProjected = "projected"
	// KindNotice is a notice to the owner (Tell): no question, the one
	// record of its ID, final as it is told.
	KindNotice = "notice"
)

// askedData is an asked record's evidence. Every field is written, empty
// or not, so that the log reads the same for every question.
type askedData struct {
	Question   string `json:"question"`
	Chat       string `json:"chat"`
	DeadlineMS int64  `json:"deadline_ms"`
	Requester  string `json:"requester"`
	Parent     string `json:"parent"`
	// Project and Task name what an approval gates (SPEC section 5);
	// empty for a plain question.
	Project string `json:"project,omitempty"`
	Task    string `json:"task,omitempty"`
}

// answeredData is an answered record's evidence: yes or no, and who said
// it (the peer of the confirm_answer request, "uid U pid P").
type answeredData struct {
	Answer string `json:"answer"`
	By     string `json:"by"`
}

// endedData is the evidence of the records that end a question without
// an answer (expired, withdrawn, failed): why.
type endedData struct {
	Reason string `json:"reason"`
}

// question is one question as the log's records made it. Times are Unix
// milliseconds; Decided is zero while it is pending.
type question struct {
	ID        string
	Text      string
	Chat      string
	Requester string
	Parent    string
	State     api.ConfirmState
	// Seq is the question's latest record.
	Seq       uint64
	Asked     int64
	Deadline  int64
	Decided   int64
	DecidedBy string
	// Project and Task: an approval's. Projected: its decision is in the
	// project's history too.
	Project   string
	Task      string
	Projected bool
}

// unprojected reports whether q is an approval whose decision its
// project has not recorded yet.
func (q *question) unprojected() bool {
	return q.Project != "" && q.State != api.ConfirmPending && !q.Projected
}

// evolve is q after the record r: the whole of how a question's state is
// derived, and pure (no clock, no I/O). q is nil before the question's
// first record; q itself is never changed, a new question is returned. A
// record the log cannot hold (an unknown kind, a question asked twice, a
// step of a question never asked or already decided, evidence that does
// not parse) is an error, and q stands as it was.
func evolve(q *question, r local.ConfirmRecord) (*question, error) {
	if r.Kind == KindNotice {
		if q != nil {
			return q, fmt.Errorf("record %d: notice %s told twice", r.Seq, r.QuestionID)
		}
		var d askedData
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return q, fmt.Errorf("record %d: notice %s: %w", r.Seq, r.QuestionID, err)
		}
		return &question{ID: r.QuestionID, Text: d.Question, Chat: d.Chat, State: api.ConfirmNotice, Seq: r.Seq,
			Asked: r.Timestamp, Deadline: r.Timestamp, Decided: r.Timestamp, DecidedBy: "a notice"}, nil // no approval: nothing to project
	}
	if r.Kind == KindAsked {
		if q != nil {
			return q, fmt.Errorf("record %d: question %s asked twice", r.Seq, r.QuestionID)
		}
		var d askedData
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return q, fmt.Errorf("record %d: question %s: %w", r.Seq, r.QuestionID, err)
		}
		return &question{
			ID: r.QuestionID, Text: d.Question, Chat: d.Chat, Requester: d.Requester, Parent: d.Parent,
			State: api.ConfirmPending, Seq: r.Seq, Asked: r.Timestamp, Deadline: d.DeadlineMS,
			Project: d.Project, Task: d.Task,
		}, nil
	}
	if q == nil {
		return q, fmt.Errorf("record %d: %s of question %s, which was never asked", r.Seq, r.Kind, r.QuestionID)
	}
	if r.Kind == KindProjected {
		if !q.unprojected() {
			return q, fmt.Errorf("record %d: question %s is no approval with a decision to record", r.Seq, r.QuestionID)
		}
		next := *q // not a step of the question: its Seq stays
		next.Projected = true
		return &next, nil
	}
	if q.State != api.ConfirmPending {
		return q, fmt.Errorf("record %d: %s of question %s, which is already %s", r.Seq, r.Kind, r.QuestionID, q.State)
	}
	next := *q
	next.Seq, next.Decided = r.Seq, r.Timestamp
	switch r.Kind {
	case KindAnswered:
		var d answeredData
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return q, fmt.Errorf("record %d: question %s: %w", r.Seq, r.QuestionID, err)
		}
		switch d.Answer {
		case "yes":
			next.State = api.ConfirmYes
		case "no":
			next.State = api.ConfirmNo
		default:
			return q, fmt.Errorf("record %d: question %s answered %q", r.Seq, r.QuestionID, d.Answer)
		}
		next.DecidedBy = d.By
	case KindExpired, KindWithdrawn, KindFailed:
		var d endedData
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return q, fmt.Errorf("record %d: question %s: %w", r.Seq, r.QuestionID, err)
		}
		next.State = map[string]api.ConfirmState{
			KindExpired: api.ConfirmExpired, KindWithdrawn: api.ConfirmWithdrawn, KindFailed: api.ConfirmFailed,
		}[r.Kind]
		next.DecidedBy = d.Reason
	default:
		return q, fmt.Errorf("record %d: question %s: unknown kind %q", r.Seq, r.QuestionID, r.Kind)
	}
	return &next, nil
}

// fold is the questions the records make, read in order. A record evolve
// refuses is skipped (the question stands as the records before it made
// it: the first decision stands) and reported among the errors.
func fold(recs []local.ConfirmRecord) (map[string]*question, []error) {
	qs := map[string]*question{}
	var errs []error
	for _, r := range recs {
		q, err := evolve(qs[r.QuestionID], r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		qs[r.QuestionID] = q
	}
	return qs, errs
}

// info is q as confirm_ask and confirm_status answer it.
func (q *question) info() api.ConfirmInfo {
	return api.ConfirmInfo{ID: q.ID, State: q.State, Chat: q.Chat, DeadlineUnixSeconds: seconds(q.Deadline)}
}

// wire is q as confirm_list lists it.
func (q *question) wire() api.Question {
	w := api.Question{
		Seq: q.Seq, ID: q.ID, Chat: q.Chat, Question: q.Text, State: q.State,
		AskedUnixSeconds: seconds(q.Asked), DeadlineUnixSeconds: seconds(q.Deadline),
	}
	if q.State != api.ConfirmPending {
		decided, by := seconds(q.Decided), q.DecidedBy
		w.DecidedUnixSeconds, w.DecidedBy = &decided, &by
	}
	if q.Requester != "" {
		r := q.Requester
		w.Requester = &r
	}
	return w
}

// seconds turns Unix milliseconds into the wire's seconds.
func seconds(ms int64) uint64 { return uint64(max(ms, 0) / 1000) }
