package web

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"strconv"

	"scv/control/api"
	"scv/reducer"
)

// workView is a project's work as its page shows it: the daemon's
// project_work_status (through Handler, as `scv project work --status`
// asks it), each agent's task titled from the ledger.
type workView struct {
	api.WorkInfo
	Rows []workRow
}

// workRow is one agent of the work.
type workRow struct {
	api.WorkSlot
	// TaskID and RunID are the task and run of its turn ("": none);
	// TaskTitle the task's title in the ledger.
	TaskID, RunID, TaskTitle string
}

// projectWork is p's work (nil when the daemon has had none for p since
// it started, or runs no work, or the server has no Handler) and the
// part of the page's version it makes ("" without a work): a hash of all
// that the section shows.
func (s *Server) projectWork(ctx context.Context, p *reducer.Project) (*workView, string, error) {
	if s.Handler == nil {
		return nil, "", nil
	}
	after := uint64(math.MaxUint64) // the section shows no log
	st, err := s.Handler.Handle(ctx, api.CmdProjectWorkStatus{Project: p.ID, After: &after})
	if e := api.ErrorOf(err); e != nil && (e.Code == api.CodeNotFound || e.Code == api.CodeUnimplemented) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if st == nil || st.Work == nil {
		return nil, "", errors.New("the daemon's reply carries no work")
	}
	w := st.Work
	v := &workView{WorkInfo: *w}
	for _, slot := range w.Slots {
		row := workRow{WorkSlot: slot, TaskID: deref(slot.Task), RunID: deref(slot.Run)}
		if t, ok := p.Task(row.TaskID); ok {
			row.TaskTitle = t.Title
		}
		v.Rows = append(v.Rows, row)
	}
	h := fnv.New64a()
	b, _ := json.Marshal(struct { // plain data: never fails
		State   api.WorkState
		Why     string
		Waiting string
		Turns   api.WorkTurns
		Slots   []api.WorkSlot
	}{w.State, w.Why, w.Waiting, w.Turns, w.Slots})
	h.Write(b)
	return v, "." + strconv.FormatUint(h.Sum64(), 10), nil
}
