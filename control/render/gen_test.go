package render

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// t0 is the first instant of the test projects.
var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// randomProject is a project of n tasks whose dependencies are drawn with
// a seeded generator: each task depends on up to maxDeps of the window
// tasks before it, and now and then on any earlier task (a long edge).
// Each task has a run or two, one after another, in dependency order.
func randomProject(seed uint64, n, maxDeps, window int) Project {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	p := Project{ID: "p-" + strconv.FormatUint(seed, 10), Name: "random", Now: t0.Add(time.Duration(n) * time.Hour), GapAfter: 10 * time.Minute}
	ends := make([]time.Time, n)
	for i := range n {
		t := Task{ID: "t" + strconv.Itoa(i), Title: "task number " + strconv.Itoa(i), Status: taskStatuses[rng.IntN(len(taskStatuses))]}
		if i > 0 {
			for range rng.IntN(maxDeps + 1) {
				lo := max(0, i-window)
				if rng.IntN(20) == 0 {
					lo = 0
				}
				t.DependsOn = append(t.DependsOn, "t"+strconv.Itoa(lo+rng.IntN(i-lo)))
			}
		}
		start := t0
		for _, d := range t.DependsOn {
			k, _ := strconv.Atoi(d[1:])
			start = later(start, ends[k])
		}
		for a := range 1 + rng.IntN(2) {
			start = start.Add(time.Duration(rng.IntN(30)) * time.Minute)
			end := start.Add(time.Duration(1+rng.IntN(90)) * time.Minute)
			st := []string{RunFailed, RunStale, RunCancelled}[rng.IntN(3)]
			if a > 0 || rng.IntN(2) == 0 {
				st = RunSucceeded
			}
			r := Run{ID: t.ID + "-r" + strconv.Itoa(a), TaskID: t.ID, Status: st, Attempt: a + 1, Start: start, End: end}
			for b := start.Add(7 * time.Minute); b.Before(end); b = b.Add(time.Duration(1+rng.IntN(15)) * time.Minute) {
				r.Beats = append(r.Beats, b)
			}
			p.Runs = append(p.Runs, r)
			t.Attempts++
			start = end
		}
		ends[i] = start
		p.Tasks = append(p.Tasks, t)
	}
	return p
}
