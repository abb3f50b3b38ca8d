package agents

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestUpdateLog: the log keeps the newest api.MaxAgentUpdates updates in
// order, says how many a reader missed, pages them, and wakes a reader
// that waits.
func TestUpdateLog(t *testing.T) {
	l := newUpdateLog()
	ups, next, dropped := l.page(context.Background(), 0, 0)
	assert.Empty(t, ups)
	assert.Zero(t, next)
	assert.Zero(t, dropped)

	total := api.MaxAgentUpdates + 2500
	for i := 1; i <= total; i++ {
		require.Equal(t, uint64(i), l.add(api.AgentUpdate{Kind: "k", Text: string(rune('a' + i%26))}))
	}
	ups, next, dropped = l.page(context.Background(), 10, 0)
	assert.Equal(t, uint64(2500-10), dropped, "the oldest are gone")
	require.Len(t, ups, maxPageUpdates)
	assert.Equal(t, uint64(2501), ups[0].Seq)
	for i, u := range ups {
		assert.Equal(t, uint64(2501+i), u.Seq)
		assert.Equal(t, string(rune('a'+int(u.Seq)%26)), u.Text)
	}
	assert.Equal(t, ups[len(ups)-1].Seq, next)
	ups, _, _ = l.page(context.Background(), uint64(total-3), 0)
	require.Len(t, ups, 3)
	assert.Equal(t, uint64(total), ups[2].Seq)

	got := make(chan []api.AgentUpdate, 1)
	go func() {
		ups, _, _ := l.page(context.Background(), uint64(total), 10*time.Second)
		got <- ups
	}()
	time.Sleep(20 * time.Millisecond)
	l.add(api.AgentUpdate{Kind: "news"})
	select {
	case ups := <-got:
		require.Len(t, ups, 1)
		assert.Equal(t, "news", ups[0].Kind)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reader was not woken")
	}
	start := time.Now()
	ups, _, _ = l.page(context.Background(), uint64(total+1), 50*time.Millisecond)
	assert.Empty(t, ups)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "waited, then answered with nothing")
}
