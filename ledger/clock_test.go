package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// serverClock is a driver whose clock is a database server's, here one
// set an hour ahead of this machine's.
type serverClock struct {
	driver.Driver
	now time.Time
}

func (d serverClock) Now(context.Context) (time.Time, error) { return d.now, nil }

// Without Options.Clock, events are stamped with the driver's clock (the
// server's, for a database daemons share), not this machine's.
func TestStampedWithTheDriversClock(t *testing.T) {
	ctx := context.Background()
	h := sqlitetest.Harness{}
	server := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	l, err := ledger.Open(ctx, serverClock{Driver: h.Open(t, h.Create(t)), now: server}, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: "/tmp"})
	require.NoError(t, err)
	assert.Equal(t, server.UnixMilli(), res.Events[0].Time)
}
