package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// BenchmarkProgress is the write path of run progress in process: 256
// writers into one project, each with a run of its own, as in the
// 256-client level of make bench without the sockets. Its allocations
// per command are what the collector has to follow at that load
// (go test -run - -bench Progress -benchmem ./ledger); its time includes
// the commits' fsyncs, so it is a guide, not a figure to quote.
func BenchmarkProgress(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "ledger.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ledger.Open(ctx, db, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Execute(ctx, reducer.CreateProject{ProjectID: "P", Name: "bench", Workspace: "/tmp"}); err != nil {
		b.Fatal(err)
	}
	const writers = 256
	for i := range writers {
		task, run := fmt.Sprintf("T%03d", i), fmt.Sprintf("R%03d", i)
		if _, err := l.Execute(ctx, reducer.AddTask{Project: "P", TaskID: task, Title: task}); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Execute(ctx, reducer.StartRun{Project: "P", TaskID: task, RunID: run, Agent: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		run := fmt.Sprintf("R%03d", i)
		wg.Go(func() {
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				if _, err := l.Execute(ctx, reducer.ProgressRun{Project: "P", RunID: run, Progress: fmt.Sprint("step ", n)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
