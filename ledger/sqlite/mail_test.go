package sqlite_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/reducer"
)

func mailKey(account string, uid uint32) local.MailKey {
	return local.MailKey{Account: account, UIDValidity: 7, UID: uid}
}

func mailRecord(account string, uid uint32, kind string, ms int64, data string) local.MailRecord {
	return local.MailRecord{MailKey: mailKey(account, uid), Kind: kind, Timestamp: ms, Data: data}
}

func mailItem(account string, uid uint32, data string) local.MailItem {
	return local.MailItem{MailKey: mailKey(account, uid), Data: data}
}

// TestMailJournalRoundTrip: records appended together get increasing
// sequences, survive a reopen field for field and read back per account
// in order after any sequence; the outbox items written with them read
// back oldest first, and go with the records that delete them.
func TestMailJournalRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	got, err := store.AppendMail(ctx, nil, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, got, "nothing to append")

	claimed := mailRecord("work", 3, "claimed", 1_700_000_000_123, `{"message_id_sha256":"ab"}`)
	first, err := store.AppendMail(ctx, []local.MailRecord{claimed}, nil, nil)
	require.NoError(t, err)
	require.Len(t, first, 1)
	assert.Equal(t, uint64(1), first[0].Seq)
	assert.Zero(t, claimed.Seq, "the caller's record is not changed")

	rest, err := store.AppendMail(ctx, []local.MailRecord{
		mailRecord("work", 3, "decided", 1_700_000_001_000, `{"decision":"reported","by":"rule"}`),
		mailRecord("home", 3, "claimed", 1_700_000_001_000, `{}`),
		mailRecord("work", 4, "claimed", 1_700_000_002_000, `{}`),
	}, []local.MailItem{mailItem("work", 3, `{"subject":"hello"}`)}, nil)
	require.NoError(t, err)
	require.Len(t, rest, 3)
	for i, r := range rest {
		assert.Equal(t, uint64(i+2), r.Seq)
	}
	_, err = store.AppendMail(ctx, []local.MailRecord{
		mailRecord("work", 4, "decided", 1_700_000_003_000, `{"decision":"reported","by":"triage","tokens":120}`),
	}, []local.MailItem{mailItem("work", 4, `{"subject":"second"}`)}, nil)
	require.NoError(t, err)
	require.NoError(t, store.Close())

	store = openDB(t, path)
	work, err := store.MailJournal(ctx, "work", 0)
	require.NoError(t, err)
	require.Len(t, work, 4)
	assert.Equal(t, first[0], work[0], "every field kept")
	assert.Equal(t, []uint64{1, 2, 4, 5}, []uint64{work[0].Seq, work[1].Seq, work[2].Seq, work[3].Seq}, "only work's, in order")
	tail, err := store.MailJournal(ctx, "work", 2)
	require.NoError(t, err)
	assert.Equal(t, work[2:], tail, "only after seq 2")
	home, err := store.MailJournal(ctx, "home", 0)
	require.NoError(t, err)
	assert.Equal(t, rest[1:2], home)

	items, err := store.MailOutbox(ctx, "work")
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, []string{`{"subject":"hello"}`, `{"subject":"second"}`}, []string{items[0].Data, items[1].Data}, "oldest first")
	assert.Equal(t, mailKey("work", 3), items[0].MailKey)
	none, err := store.MailOutbox(ctx, "home")
	require.NoError(t, err)
	assert.Empty(t, none)

	// The digest: both sent, both items gone, in one step.
	_, err = store.AppendMail(ctx, []local.MailRecord{
		mailRecord("work", 3, "sent", 1_700_000_900_000, `{"digest":"mail-work-1"}`),
		mailRecord("work", 4, "sent", 1_700_000_900_000, `{"digest":"mail-work-1"}`),
	}, nil, []local.MailKey{mailKey("work", 3), mailKey("work", 4)})
	require.NoError(t, err)
	items, err = store.MailOutbox(ctx, "work")
	require.NoError(t, err)
	assert.Empty(t, items)
	assertNoEvents(t, path)

	require.NoError(t, store.Close())
	_, err = store.AppendMail(ctx, []local.MailRecord{claimed}, nil, nil)
	assert.ErrorIs(t, err, driver.ErrStorage, "a closed store")
}

// TestMailJournalRefusesASecondStep: a mail claimed, decided or sent a
// second time, an outbox item put twice or deleted when it is not there,
// or data that is not JSON is refused, and nothing of the call is kept.
func TestMailJournalRefusesASecondStep(t *testing.T) {
	ctx := context.Background()
	store := openDB(t, dbPath(t))
	_, err := store.AppendMail(ctx, []local.MailRecord{
		mailRecord("work", 1, "claimed", 1, `{}`),
		mailRecord("work", 1, "decided", 2, `{"decision":"reported","by":"rule"}`),
	}, []local.MailItem{mailItem("work", 1, `{}`)}, nil)
	require.NoError(t, err)
	journal, err := store.MailJournal(ctx, "work", 0)
	require.NoError(t, err)
	outbox, err := store.MailOutbox(ctx, "work")
	require.NoError(t, err)

	for name, c := range map[string]struct {
		recs []local.MailRecord
		put  []local.MailItem
		del  []local.MailKey
		want error
	}{
		"claimed twice": {recs: []local.MailRecord{mailRecord("work", 2, "claimed", 3, `{}`), mailRecord("work", 1, "claimed", 3, `{}`)},
			want: reducer.ErrConflict},
		"decided twice": {recs: []local.MailRecord{mailRecord("work", 1, "decided", 3, `{"decision":"skipped","by":"rule"}`)},
			want: reducer.ErrConflict},
		"sent twice in one call": {recs: []local.MailRecord{mailRecord("work", 1, "sent", 3, `{}`), mailRecord("work", 1, "sent", 3, `{}`)},
			del: []local.MailKey{mailKey("work", 1)}, want: reducer.ErrConflict},
		"an item put twice": {recs: []local.MailRecord{mailRecord("work", 2, "claimed", 3, `{}`)},
			put: []local.MailItem{mailItem("work", 1, `{}`)}, want: reducer.ErrConflict},
		"an item deleted that is not there": {recs: []local.MailRecord{mailRecord("work", 2, "sent", 3, `{}`)},
			del: []local.MailKey{mailKey("work", 2)}, want: reducer.ErrConflict},
		"a record not JSON": {recs: []local.MailRecord{mailRecord("work", 2, "claimed", 3, `not json`)},
			want: reducer.ErrInvalidArgument},
		"an item not JSON": {recs: []local.MailRecord{mailRecord("work", 2, "claimed", 3, `{}`)},
			put: []local.MailItem{mailItem("work", 2, `{`)}, want: reducer.ErrInvalidArgument},
	} {
		_, err := store.AppendMail(ctx, c.recs, c.put, c.del)
		assert.ErrorIs(t, err, c.want, name)
		after, err := store.MailJournal(ctx, "work", 0)
		require.NoError(t, err)
		assert.Equal(t, journal, after, "%s: nothing appended", name)
		items, err := store.MailOutbox(ctx, "work")
		require.NoError(t, err)
		assert.Equal(t, outbox, items, "%s: the outbox as it was", name)
	}
}

// TestMailJournalIsAppendOnly: the schema refuses to change or remove a
// row of the mail journal, whoever asks; the outbox's rows go.
func TestMailJournalIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	_, err := store.AppendMail(ctx, []local.MailRecord{
		mailRecord("work", 1, "claimed", 1, `{}`),
		mailRecord("work", 1, "decided", 2, `{"decision":"reported","by":"rule"}`),
	}, []local.MailItem{mailItem("work", 1, `{}`)}, nil)
	require.NoError(t, err)
	want, err := store.MailJournal(ctx, "work", 0)
	require.NoError(t, err)

	db := rawDB(t, path)
	for _, s := range []string{
		`UPDATE mail_journal SET kind = 'sent' WHERE seq = 1`,
		`UPDATE mail_journal SET data = '{"decision":"skipped"}'`,
		`DELETE FROM mail_journal WHERE seq = 2`,
		`DELETE FROM mail_journal`,
	} {
		_, err := db.Exec(s)
		assert.ErrorContains(t, err, "append-only", s)
	}
	_, err = db.Exec(`INSERT INTO mail_journal (account, uid_validity, uid, kind, timestamp_ms, data) VALUES ('work', 7, 2, 'claimed', 3, 'x')`)
	assert.Error(t, err, "data must be JSON")
	got, err := store.MailJournal(ctx, "work", 0)
	require.NoError(t, err)
	assert.Equal(t, want, got, "nothing changed")
	_, err = db.Exec(`DELETE FROM mail_outbox`)
	assert.NoError(t, err, "the outbox is not the journal")
}
