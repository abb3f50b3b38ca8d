package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// A command is decided, appended and folded in one call; the committed
// state is then read without waiting for the writer.
func Example() {
	dir, _ := os.MkdirTemp("", "ledger")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), sqlite.Options{})
	if err != nil {
		panic(err)
	}
	clock := func() time.Time { return time.UnixMilli(1_800_000_000_000) }
	l, err := ledger.Open(ctx, db, ledger.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer l.Close() // and the database with it

	l.Execute(ctx, reducer.CreateProject{ProjectID: "01PROJECT", Name: "acme", Workspace: dir})
	res, _ := l.Execute(ctx, reducer.AddTask{Project: "acme", TaskID: "01TASK", Title: "build"})
	fmt.Println(res.Events[0].Sequence, res.Events[0].Body.Kind())

	_, err = l.Execute(ctx, reducer.StartRun{Project: "acme", TaskID: "missing", RunID: "01RUN", Agent: "codex"})
	fmt.Println(err)

	p, _ := l.Project(ctx, "acme")
	t, _ := p.Task("01TASK")
	fmt.Println(p.Phase(), p.Status(), t.Status)
	// Output:
	// 2 task_added
	// not found: task "missing"
	// planning active ready
}
