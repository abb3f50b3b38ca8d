package control

import (
	"scv/control/api"
	"scv/reducer"
	"strconv"
	"unicode/utf8"
)

// marshal is reducer.Marshal: every JSON the daemon writes, stored or on
// the wire, is encoded by that one function.
func marshal(v any) ([]byte, error) { return reducer.Marshal(v) }

// The reply to a write is encoded on every request's path, so the common
// shapes (a DaemonStatus whose project is a summary) are appended by hand;
// anything else goes through marshal. TestAppendStatusEveryField holds the
// two to the same bytes for every field of DaemonStatus at every depth, set,
// zero and empty, so a field added to the wire types and not here fails it;
// TestAppendStatusMatchesMarshal does so for random replies and strings
// that need escaping.

// appendStatus appends st as serde writes a DaemonStatus.
func appendStatus(b []byte, st *api.DaemonStatus) ([]byte, error) {
	b = append(b, `{"version":`...)
	b = appendString(b, st.Version)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(st.PID), 10)
	b = append(b, `,"components":`...)
	var err error
	// nil is null, as marshal writes it; Service.status always sets a list.
	if st.Components != nil && len(st.Components) == 0 {
		b = append(b, "[]"...)
	} else if b, err = appendMarshal(b, st.Components); err != nil {
		return nil, err
	}
	b = append(b, `,"delegations":`...)
	if d := st.Delegations; len(d.Entries) == 0 && len(d.Killed) == 0 {
		b = append(b, `{"active":`...)
		b = strconv.AppendUint(b, d.Active, 10)
		if d.Idle != nil {
			b = append(b, `,"idle":`...)
			b = strconv.AppendUint(b, *d.Idle, 10)
		}
		b = append(b, `,"reaped":`...)
		b = strconv.AppendUint(b, d.Reaped, 10)
		b = append(b, '}')
	} else if b, err = appendMarshal(b, d); err != nil {
		return nil, err
	}
	if st.Restart != nil {
		b = append(b, `,"restart":`...)
		if b, err = appendMarshal(b, st.Restart); err != nil {
			return nil, err
		}
	}
	if st.Confirm != nil {
		b = append(b, `,"confirm":`...)
		if b, err = appendMarshal(b, st.Confirm); err != nil {
			return nil, err
		}
	}
	if r := st.Project; r != nil {
		b = append(b, `,"project":`...)
		switch r.Kind {
		case api.KindCreated, api.KindStatus, api.KindUpdated, api.KindTaskAdded, api.KindRunStarted:
			b = append(b, `{"kind":`...)
			b = appendString(b, string(r.Kind))
			b = append(b, `,"project":`...)
			b = appendSummary(b, r.Project)
			switch r.Kind {
			case api.KindTaskAdded:
				b = append(b, `,"task_id":`...)
				b = appendString(b, r.TaskID)
			case api.KindRunStarted:
				b = append(b, `,"run_id":`...)
				b = appendString(b, r.RunID)
			case api.KindCreated, api.KindStatus, api.KindUpdated:
				if r.Spend != nil { // project_status's
					b = append(b, `,"spend":`...)
					if b, err = appendMarshal(b, r.Spend); err != nil {
						return nil, err
					}
				}
			}
			b = append(b, '}')
		default:
			if b, err = appendMarshal(b, r); err != nil {
				return nil, err
			}
		}
	}
	if len(st.Questions) > 0 {
		b = append(b, `,"questions":`...)
		if b, err = appendMarshal(b, st.Questions); err != nil {
			return nil, err
		}
	}
	if st.Projects != nil {
		b = append(b, `,"projects":`...)
		if b, err = appendMarshal(b, st.Projects); err != nil {
			return nil, err
		}
	}
	if st.Agents != nil {
		b = append(b, `,"agents":`...)
		if b, err = appendMarshal(b, st.Agents); err != nil {
			return nil, err
		}
	}
	if st.AgentUpdates != nil {
		b = append(b, `,"agent_updates":`...)
		if b, err = appendMarshal(b, st.AgentUpdates); err != nil {
			return nil, err
		}
	}
	if st.Task != nil {
		b = append(b, `,"task":`...)
		if b, err = appendMarshal(b, st.Task); err != nil {
			return nil, err
		}
	}
	if st.Plan != nil {
		b = append(b, `,"plan":`...)
		if b, err = appendMarshal(b, st.Plan); err != nil {
			return nil, err
		}
	}
	if st.Work != nil {
		b = append(b, `,"work":`...)
		if b, err = appendMarshal(b, st.Work); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendSummary(b []byte, p *api.ProjectSummary) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"id":`...)
	b = appendString(b, p.ID)
	b = append(b, `,"name":`...)
	b = appendString(b, p.Name)
	b = append(b, `,"workspace":`...)
	b = appendString(b, p.Workspace)
	b = append(b, `,"phase":`...)
	b = appendString(b, string(p.Phase))
	b = append(b, `,"status":`...)
	b = appendString(b, string(p.Status))
	b = append(b, `,"created_unix_seconds":`...)
	b = strconv.AppendUint(b, p.CreatedUnixSeconds, 10)
	b = append(b, `,"updated_unix_seconds":`...)
	b = strconv.AppendUint(b, p.UpdatedUnixSeconds, 10)
	b = append(b, `,"task_count":`...)
	b = strconv.AppendUint(b, p.TaskCount, 10)
	b = append(b, `,"completed_tasks":`...)
	b = strconv.AppendUint(b, p.CompletedTasks, 10)
	b = append(b, `,"last_heartbeat_unix_seconds":`...)
	if p.LastHeartbeatUnixSeconds == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, *p.LastHeartbeatUnixSeconds, 10)
	}
	return append(b, '}')
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	m, err := marshal(v)
	return append(b, m...), err
}

// appendString appends s as a JSON string the way serde_json writes it:
// only '"', '\\' and control characters are escaped.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		m, _ := marshal(s) // writes U+FFFD for what is not UTF-8
		return append(b, m...)
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
