package render

import (
	"slices"
	"time"
)

// CriticalPath returns the IDs of the runs on p's critical path, earliest
// first: the chain of runs that decided how long the project took (see
// the package doc for its definition). It is empty when p has no runs.
func CriticalPath(p Project) []string {
	var ids []string
	for _, r := range criticalRuns(p, runEnds(p)) {
		ids = append(ids, p.Runs[r].ID)
	}
	return ids
}

// runEnds is the end of each run as drawn: its End; while it runs, Now,
// or without Now its last beat (or its start). Never before its start.
func runEnds(p Project) []time.Time {
	ends := make([]time.Time, len(p.Runs))
	for i, r := range p.Runs {
		e := r.End
		if e.IsZero() {
			e = p.Now
			if e.IsZero() {
				for _, b := range r.Beats {
					e = later(e, b)
				}
			}
		}
		ends[i] = later(e, r.Start)
	}
	return ends
}

// criticalRuns is CriticalPath as indices into p.Runs, given their ends.
func criticalRuns(p Project, ends []time.Time) []int {
	if len(p.Runs) == 0 {
		return nil
	}
	ix := indexTasks(p.Tasks)
	runsOf := map[string][]int{}
	for i, r := range p.Runs {
		runsOf[r.TaskID] = append(runsOf[r.TaskID], i)
	}
	// latestBefore is the run of task ti that ended last at or before t,
	// the later in Runs among equals; -1 if none.
	latestBefore := func(ti int, t time.Time) int {
		best := -1
		for _, r := range runsOf[p.Tasks[ti].ID] {
			if !ends[r].After(t) && (best < 0 || !ends[r].Before(ends[best])) {
				best = r
			}
		}
		return best
	}

	cur := 0
	for i := range p.Runs {
		if !ends[i].Before(ends[cur]) {
			cur = i
		}
	}
	var chain [][]int
	for {
		// The run and the task's runs before it.
		own := runsOf[p.Runs[cur].TaskID]
		seg := own[:slices.Index(own, cur)+1]
		chain = append(chain, seg)
		ti, ok := ix.byID[p.Runs[cur].TaskID]
		if !ok {
			break
		}
		// Of the dependencies, looking through those with no run that
		// ended in time to theirs, the run that ended last before the
		// task's first run started; the first found among equals.
		first := p.Runs[seg[0]].Start
		next := -1
		queue := slices.Clone(ix.deps[ti])
		seen := map[int]bool{}
		for _, d := range queue {
			seen[d] = true
		}
		for q := 0; q < len(queue); q++ {
			d := queue[q]
			r := latestBefore(d, first)
			if r < 0 {
				for _, dd := range ix.deps[d] {
					if !seen[dd] {
						seen[dd] = true
						queue = append(queue, dd)
					}
				}
				continue
			}
			if next < 0 || ends[r].After(ends[next]) {
				next = r
			}
		}
		if next < 0 {
			break
		}
		cur = next
	}
	var out []int
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i]...)
	}
	return out
}
