package confirm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/ledger/local"
)

// TestAskAnswerYesNo: an asked question is pending in the chosen chat with
// the default deadline, recorded before it is handed over, and the
// owner's yes and no are what confirm_status then reports.
func TestAskAnswerYesNo(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.chats.onDeliver = func(d delivery) {
		recs, err := e.db.ConfirmLog(ctx, 0)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		last := recs[len(recs)-1]
		assert.Equal(t, []string{d.ID, KindAsked}, []string{last.QuestionID, last.Kind}, "recorded before it is handed over")
	}

	a := e.ask("Deploy to production?\nIt restarts the API.", "", 0)
	assert.Equal(t, api.ConfirmInfo{ID: a.ID, State: api.ConfirmPending, Chat: "local:owner",
		DeadlineUnixSeconds: secs(start.Add(1800 * time.Second))}, a, "DEFAULT_CONFIRM_SECONDS")
	assert.Len(t, a.ID, 26, "a ULID")
	b := e.ask("Delete the old backups?", "", 0)
	assert.Equal(t, []delivery{{"local:owner", a.ID, "Deploy to production?\nIt restarts the API."},
		{"local:owner", b.ID, "Delete the old backups?"}}, e.chats.Delivered())
	assert.Equal(t, api.ConfirmPending, e.status(a.ID))

	e.clock.Advance(10 * time.Second)
	got, err := e.m.Answer(ctx, a.ID, true, "uid 1000 pid 4242")
	require.NoError(t, err)
	assert.Equal(t, api.ConfirmYes, got.State)
	got, err = e.m.Answer(ctx, b.ID, false, "uid 1000 pid 4243")
	require.NoError(t, err)
	assert.Equal(t, api.ConfirmNo, got.State)
	assert.Equal(t, api.ConfirmYes, e.status(a.ID))
	assert.Equal(t, api.ConfirmNo, e.status(b.ID))

	// A decided question stays decided: neither the deadline nor silence
	// changes it.
	e.clock.Advance(2 * time.Hour)
	e.tick()
	assert.Equal(t, api.ConfirmYes, e.status(a.ID))
	assert.Equal(t, []string{KindAsked, KindAsked, KindAnswered, KindAnswered}, kinds(e.log()))

	_, err = e.m.Status(ctx, "01NOSUCHQUESTION0000000000")
	assertRefused(t, err, api.CodeNotFound, api.ReasonNotFound)
	_, err = e.m.Answer(ctx, "01NOSUCHQUESTION0000000000", true, "uid 1000 pid 1")
	assertRefused(t, err, api.CodeNotFound, api.ReasonNotFound)
}

// TestExpiry: at its deadline a pending question expires (Tick), not a
// millisecond before; when the deadline and the withdrawal are due
// together, the deadline wins.
func TestExpiry(t *testing.T) {
	e := newEnv(t)
	a := e.ask("Short one?", "", 30)
	assert.Equal(t, secs(start.Add(30*time.Second)), a.DeadlineUnixSeconds)

	e.clock.Advance(30*time.Second - time.Millisecond)
	e.tick()
	assert.Equal(t, api.ConfirmPending, e.status(a.ID))
	e.clock.Advance(time.Millisecond)
	e.tick()
	assert.Equal(t, api.ConfirmExpired, e.status(a.ID))
	q := e.question(a.ID)
	assert.Equal(t, "deadline passed", *q.DecidedBy)
	assert.Equal(t, secs(start.Add(30*time.Second)), *q.DecidedUnixSeconds)

	// Deadline and withdrawal both due: expired.
	b := e.ask("A minute?", "", 60)
	e.clock.Advance(time.Minute)
	e.tick()
	assert.Equal(t, api.ConfirmExpired, e.status(b.ID))
	assert.Equal(t, []string{KindAsked, KindExpired, KindAsked, KindExpired}, kinds(e.log()))
}

// TestWithdrawal: a pending question nobody asks about for a minute is
// withdrawn; a confirm_status within the minute starts it again.
func TestWithdrawal(t *testing.T) {
	e := newEnv(t)
	quiet := e.ask("Nobody follows this one?", "", 0)
	followed := e.ask("Followed?", "", 0)

	e.clock.Advance(50 * time.Second)
	assert.Equal(t, api.ConfirmPending, e.status(followed.ID))
	e.clock.Advance(10*time.Second - time.Millisecond)
	e.tick()
	assert.Equal(t, api.ConfirmPending, e.question(quiet.ID).State, "59.999 s")
	e.clock.Advance(time.Millisecond)
	e.tick()
	assert.Equal(t, api.ConfirmWithdrawn, e.question(quiet.ID).State, "60 s without confirm_status")
	assert.Equal(t, "not asked about for a minute", *e.question(quiet.ID).DecidedBy)
	assert.Equal(t, api.ConfirmPending, e.question(followed.ID).State, "asked about at +50 s")

	e.clock.Advance(50*time.Second - time.Millisecond)
	e.tick()
	assert.Equal(t, api.ConfirmPending, e.question(followed.ID).State, "+109.999 s")
	e.clock.Advance(time.Millisecond)
	e.tick()
	assert.Equal(t, api.ConfirmWithdrawn, e.status(followed.ID), "+110 s: a minute after its last confirm_status")

	// A withdrawn question takes no answer.
	_, err := e.m.Answer(context.Background(), quiet.ID, true, "uid 1000 pid 1")
	assertRefused(t, err, api.CodeConflict, api.ReasonConflict)
	assert.ErrorContains(t, err, "withdrawn")
}

// TestFailed: a question that cannot be handed to a chat is recorded,
// asked and failed, and answered as failed (not refused), with the chat
// that was chosen, if one was.
func TestFailed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listed []string
		notify string
		fail   error
		chat   string
		reason string
	}{
		{name: "no chat connected", reason: "no chat connected"},
		{name: "two chats and no notify target", listed: []string{"local:owner", "telegram:bot"},
			reason: "no chat chosen: 2 chats connected and no notify target"},
		{name: "the chosen chat is not connected", listed: []string{"local:owner"}, notify: "telegram:bot",
			chat: "telegram:bot", reason: "chat telegram:bot is not connected"},
		{name: "delivery fails", listed: []string{"local:owner"}, fail: errors.New("network down"),
			chat: "local:owner", reason: "delivery failed: network down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.chats.listed, e.chats.fail, e.m.Notify = tc.listed, tc.fail, tc.notify
			a := e.ask("Proceed?", "", 0)
			assert.Equal(t, api.ConfirmInfo{ID: a.ID, State: api.ConfirmFailed, Chat: tc.chat,
				DeadlineUnixSeconds: secs(start.Add(DefaultTimeout))}, a)
			assert.Equal(t, api.ConfirmFailed, e.status(a.ID))
			q := e.question(a.ID)
			assert.Equal(t, tc.reason, *q.DecidedBy)
			assert.Equal(t, secs(start), *q.DecidedUnixSeconds)
			assert.Equal(t, []string{KindAsked, KindFailed}, kinds(e.log()))
			assert.Empty(t, e.chats.Delivered())
			_, err := e.m.Answer(context.Background(), a.ID, true, "uid 1000 pid 1")
			assertRefused(t, err, api.CodeConflict, api.ReasonConflict)
		})
	}
}

// TestRestartFailsPending: a restarted daemon fails every question still
// pending (its answer could not have been kept) and keeps every decided
// one as it was.
func TestRestartFailsPending(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	open := e.ask("Still open?", "", 0)
	done := e.ask("Answered?", "", 0)
	_, err := e.m.Answer(ctx, done.ID, true, "uid 1000 pid 4242")
	require.NoError(t, err)

	e.clock.Advance(5 * time.Second)
	e.m = e.manager()
	assert.Equal(t, api.ConfirmFailed, e.status(open.ID))
	assert.Equal(t, "answer lost: the daemon restarted", *e.question(open.ID).DecidedBy)
	assert.Equal(t, secs(start.Add(5*time.Second)), *e.question(open.ID).DecidedUnixSeconds)
	assert.Equal(t, api.ConfirmYes, e.status(done.ID))
	_, err = e.m.Answer(ctx, open.ID, true, "uid 1000 pid 4242")
	assertRefused(t, err, api.CodeConflict, api.ReasonConflict)

	// A second restart finds nothing pending and appends nothing.
	n := len(e.log())
	e.m = e.manager()
	assert.Len(t, e.log(), n)
}

// TestRouting: the chat that started the delegation's work wins over the
// notify target, which wins over the only connected chat; a mail account
// is never listed among the chats, so it neither is chosen nor makes the
// choice ambiguous.
func TestRouting(t *testing.T) {
	e := newEnv(t)
	e.chats.listed = []string{"local:owner", "telegram:work"}
	e.chats.others = []string{"email:inbox"}
	var asked []string
	e.m.DelegationChat = func(parent string) string {
		asked = append(asked, parent)
		if strings.HasSuffix(parent, "H2") {
			return "telegram:work"
		}
		return ""
	}
	e.m.Notify = "local:owner"

	a := e.ask("From a delegation?", "H1,H2", 0)
	assert.Equal(t, "telegram:work", a.Chat, "the delegation's chat over notify")
	assert.Equal(t, []string{"H1,H2"}, asked, "given the whole chain")
	assert.Equal(t, "H2", *e.question(a.ID).Requester, "the last of the chain")

	b := e.ask("From a delegation without a chat?", "H3", 0)
	assert.Equal(t, "local:owner", b.Chat, "notify, when the delegation has no chat")
	c := e.ask("From a shell?", "", 0)
	assert.Equal(t, "local:owner", c.Chat, "notify")
	assert.Nil(t, e.question(c.ID).Requester)

	e.m.Notify = ""
	e.chats.listed = []string{"telegram:work"}
	d := e.ask("Only one chat?", "", 0)
	assert.Equal(t, api.ConfirmInfo{ID: d.ID, State: api.ConfirmPending, Chat: "telegram:work",
		DeadlineUnixSeconds: d.DeadlineUnixSeconds}, d, "the only connected chat, the mail account aside")

	e.m.DelegationChat = nil
	f := e.ask("Delegation chats unknown?", "H1,H2", 0)
	assert.Equal(t, "telegram:work", f.Chat)

	var chats []string
	for _, dl := range e.chats.Delivered() {
		chats = append(chats, dl.Chat)
	}
	assert.Equal(t, []string{"telegram:work", "local:owner", "local:owner", "telegram:work", "telegram:work"}, chats)
}

// TestAskRefusals: a question or a timeout the contract does not allow is
// refused with invalid_argument and nothing is recorded or delivered; a
// timeout above the maximum is refused, not clamped.
func TestAskRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for name, c := range map[string]api.CmdConfirmAsk{
		"empty":                {Question: ""},
		"blank":                {Question: " \n "},
		"2001 characters":      {Question: strings.Repeat("é", 2001)},
		"a tab":                {Question: "a\tb"},
		"a NUL":                {Question: "a\x00b"},
		"a carriage return":    {Question: "a\r\nb"},
		"DEL":                  {Question: "a\x7fb"},
		"a C1 control":         {Question: "a\u0085b"},
		"not UTF-8":            {Question: "a\xffb"},
		"timeout 0":            {Question: "ok?", TimeoutSeconds: ptr(uint64(0))},
		"timeout above 14400":  {Question: "ok?", TimeoutSeconds: ptr(uint64(14401))},
		"timeout far too long": {Question: "ok?", TimeoutSeconds: ptr(uint64(1 << 62))},
	} {
		_, err := e.m.Ask(ctx, c)
		assertRefused(t, err, api.CodeInvalidParams, api.ReasonInvalidArgument, name)
	}
	assert.Empty(t, e.log(), "nothing recorded")
	assert.Empty(t, e.chats.Delivered(), "nothing delivered")

	longest := e.ask(strings.Repeat("é", 2000), "", MaxConfirmSeconds)
	assert.Equal(t, secs(start.Add(4*time.Hour)), longest.DeadlineUnixSeconds, "MAX_CONFIRM_SECONDS is allowed")
	shortest := e.ask("x", "", 1)
	assert.Equal(t, secs(start.Add(time.Second)), shortest.DeadlineUnixSeconds)
	assert.Equal(t, api.ConfirmPending, e.status(longest.ID))
}

// MaxConfirmSeconds is MAX_CONFIRM_SECONDS as the wire carries it.
const MaxConfirmSeconds = uint64(MaxTimeout / time.Second)

// TestAnswerOnce: a question is answered once; a second answer is refused
// as a conflict naming its state and appends nothing, and so is an answer
// after the deadline, which finds the question expired even before Tick
// ran (and records that).
func TestAnswerOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.ask("Once?", "", 0)
	_, err := e.m.Answer(ctx, a.ID, true, "uid 1000 pid 1")
	require.NoError(t, err)
	n := len(e.log())
	_, err = e.m.Answer(ctx, a.ID, false, "uid 1000 pid 2")
	assertRefused(t, err, api.CodeConflict, api.ReasonConflict)
	assert.ErrorContains(t, err, "is yes")
	assert.Len(t, e.log(), n, "nothing appended for a refused answer")
	assert.Equal(t, api.ConfirmYes, e.status(a.ID))

	late := e.ask("Late?", "", 30)
	e.clock.Advance(30 * time.Second)
	_, err = e.m.Answer(ctx, late.ID, true, "uid 1000 pid 3")
	assertRefused(t, err, api.CodeConflict, api.ReasonConflict)
	assert.ErrorContains(t, err, "expired")
	assert.Equal(t, api.ConfirmExpired, e.status(late.ID))
	assert.Equal(t, []string{KindAsked, KindAnswered, KindAsked, KindExpired}, kinds(e.log()))
	e.tick()
	assert.Len(t, e.log(), 4, "Tick finds nothing left to do")

	// confirm_status after the deadline, before Tick: expired too.
	st := e.ask("Status late?", "", 30)
	e.clock.Advance(30 * time.Second)
	assert.Equal(t, api.ConfirmExpired, e.status(st.ID))
	assert.Equal(t, KindExpired, e.log()[5].Kind)
}

// TestConcurrentAnswers: of many answers racing for one question exactly
// one is taken and one record appended.
func TestConcurrentAnswers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.ask("Race?", "", 0)
	var wg sync.WaitGroup
	results := make([]error, 16)
	for i := range results {
		wg.Go(func() {
			_, results[i] = e.m.Answer(ctx, a.ID, i%2 == 0, fmt.Sprintf("uid 1000 pid %d", i))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		if err == nil {
			won++
			continue
		}
		assertRefused(t, err, api.CodeConflict, api.ReasonConflict)
	}
	assert.Equal(t, 1, won)
	assert.Equal(t, []string{KindAsked, KindAnswered}, kinds(e.log()))
}

// TestConcurrentRequests: asks, statuses, answers, ticks and lists at once
// (run with -race); afterwards memory is the fold of the log, and every
// question was decided at most once.
func TestConcurrentRequests(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				a, err := e.m.Ask(ctx, api.CmdConfirmAsk{Question: fmt.Sprintf("q %d/%d", w, i)})
				if !assert.NoError(t, err) {
					return
				}
				_, err = e.m.Status(ctx, a.ID)
				assert.NoError(t, err)
				if i%3 != 0 {
					// Withdrawn meanwhile, if the ticks passed a minute.
					if _, err = e.m.Answer(ctx, a.ID, i%2 == 0, "uid 1000 pid 1"); err != nil {
						assertRefused(t, err, api.CodeConflict, api.ReasonConflict)
					}
				}
				_, err = e.m.List(ctx, api.CmdConfirmList{After: ptr(uint64(i))})
				assert.NoError(t, err)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			e.clock.Advance(3 * time.Second)
			assert.NoError(t, e.m.Tick(ctx))
		}
	})
	wg.Wait()

	want, errs := fold(e.log())
	assert.Empty(t, errs, "no question decided twice")
	e.m.mu.Lock()
	got := e.m.qs
	e.m.mu.Unlock()
	assert.Equal(t, want, got, "memory is the fold of the log")
	assert.Len(t, got, 80)
	qs := e.list()
	for i := 1; i < len(qs); i++ {
		assert.Less(t, qs[i-1].Seq, qs[i].Seq, "in log order")
	}
}

// TestAudit: a new Manager over the same database lists every question
// with who decided what and when, and the log holds every step in order.
func TestAudit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.m.DelegationChat = func(string) string { return "local:owner" }
	yes := e.ask("Merge the branch?", "H1,H2", 0)
	e.clock.Advance(7 * time.Second)
	_, err := e.m.Answer(ctx, yes.ID, true, "uid 1000 pid 4242")
	require.NoError(t, err)
	expired := e.ask("Rotate the keys?", "", 30)
	e.clock.Advance(30 * time.Second)
	e.tick()
	e.chats.listed = nil
	failed := e.ask("Nobody there?", "", 0)
	require.NoError(t, e.l.Close())

	e.db, e.l = openLedger(t, e.path)
	e.clock.Advance(time.Minute)
	e.m = e.manager()
	qs := e.list()
	require.Len(t, qs, 3)
	t0 := secs(start)
	assert.Equal(t, []api.Question{
		{Seq: 2, ID: yes.ID, Chat: "local:owner", Question: "Merge the branch?", State: api.ConfirmYes,
			AskedUnixSeconds: t0, DeadlineUnixSeconds: t0 + 1800, DecidedUnixSeconds: ptr(t0 + 7),
			DecidedBy: ptr("uid 1000 pid 4242"), Requester: ptr("H2")},
		{Seq: 4, ID: expired.ID, Chat: "local:owner", Question: "Rotate the keys?", State: api.ConfirmExpired,
			AskedUnixSeconds: t0 + 7, DeadlineUnixSeconds: t0 + 37, DecidedUnixSeconds: ptr(t0 + 37),
			DecidedBy: ptr("deadline passed")},
		{Seq: 6, ID: failed.ID, Chat: "", Question: "Nobody there?", State: api.ConfirmFailed,
			AskedUnixSeconds: t0 + 37, DeadlineUnixSeconds: t0 + 37 + 1800, DecidedUnixSeconds: ptr(t0 + 37),
			DecidedBy: ptr("no chat connected")},
	}, qs)

	recs := e.log()
	assert.Equal(t, []string{KindAsked, KindAnswered, KindAsked, KindExpired, KindAsked, KindFailed}, kinds(recs))
	for i, r := range recs {
		assert.Equal(t, uint64(i+1), r.Seq)
	}
	assert.Equal(t, local.ConfirmRecord{Seq: 1, QuestionID: yes.ID, Kind: KindAsked, Timestamp: start.UnixMilli(),
		Data: fmt.Sprintf(`{"question":"Merge the branch?","chat":"local:owner","deadline_ms":%d,"requester":"H2","parent":"H1,H2"}`,
			start.Add(DefaultTimeout).UnixMilli())}, recs[0])
	assert.Equal(t, local.ConfirmRecord{Seq: 2, QuestionID: yes.ID, Kind: KindAnswered, Timestamp: start.Add(7 * time.Second).UnixMilli(),
		Data: `{"answer":"yes","by":"uid 1000 pid 4242"}`}, recs[1])
}

// TestList: confirm_list lists what changed after a sequence, of one chat
// or all, in log order; a question is listed again when it changes.
func TestList(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.chats.listed = []string{"local:owner", "telegram:bot"}
	// a is asked (seq 1), b is asked (seq 2), a is answered (seq 3).
	e.m.Notify = "local:owner"
	a := e.ask("a?", "", 0)
	e.m.Notify = "telegram:bot"
	b := e.ask("b?", "", 0)
	_, err := e.m.Answer(ctx, a.ID, false, "uid 1000 pid 1")
	require.NoError(t, err)
	assert.Equal(t, []string{"local:owner", "telegram:bot"}, []string{a.Chat, b.Chat})

	ids := func(qs []api.Question) []string {
		out := []string{}
		for _, q := range qs {
			out = append(out, fmt.Sprintf("%s@%d", q.Question, q.Seq))
		}
		return out
	}
	list := func(c api.CmdConfirmList) []string {
		qs, err := e.m.List(ctx, c)
		require.NoError(t, err)
		return ids(qs)
	}
	assert.Equal(t, []string{"b?@2", "a?@3"}, list(api.CmdConfirmList{}))
	assert.Equal(t, []string{"a?@3"}, list(api.CmdConfirmList{After: ptr(uint64(2))}))
	assert.Equal(t, []string{}, list(api.CmdConfirmList{After: ptr(uint64(3))}))
	assert.Equal(t, []string{"a?@3"}, list(api.CmdConfirmList{Chat: ptr("local:owner")}))
	assert.Equal(t, []string{"b?@2"}, list(api.CmdConfirmList{Chat: ptr("telegram:bot")}))
	assert.Equal(t, []string{}, list(api.CmdConfirmList{Chat: ptr("telegram:bot"), After: ptr(uint64(2))}))
	assert.Equal(t, []string{}, list(api.CmdConfirmList{Chat: ptr("nowhere:x")}))

	_, err = e.m.List(ctx, api.CmdConfirmList{WaitSeconds: ptr(uint64(api.MaxListWait + 1))})
	assertRefused(t, err, api.CodeInvalidParams, api.ReasonInvalidArgument)
}

// TestListWaits: a waiting confirm_list answers as soon as a question of
// its chat is asked, ignores records of other chats meanwhile, answers
// empty when its wait ends with nothing, and stops when its caller goes.
func TestListWaits(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.chats.listed = []string{"local:owner", "telegram:bot"}
	e.m.Notify = "local:owner"
	e.ask("before?", "", 0) // seq 1

	type result struct {
		qs      []api.Question
		err     error
		elapsed time.Duration
	}
	done := make(chan result, 1)
	go func() {
		begin := time.Now()
		qs, err := e.m.List(ctx, api.CmdConfirmList{Chat: ptr("local:owner"), After: ptr(uint64(1)), WaitSeconds: ptr(uint64(20))})
		done <- result{qs, err, time.Since(begin)}
	}()
	select {
	case r := <-done:
		t.Fatalf("answered before anything was asked: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	e.m.Notify = "telegram:bot"
	e.ask("elsewhere?", "", 0) // seq 2, another chat
	select {
	case r := <-done:
		t.Fatalf("answered for another chat's question: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	e.m.Notify = "local:owner"
	asked := e.ask("now?", "", 0) // seq 3
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Len(t, r.qs, 1)
		assert.Equal(t, asked.ID, r.qs[0].ID)
		assert.Equal(t, uint64(3), r.qs[0].Seq)
		assert.Less(t, r.elapsed, 15*time.Second, "well before its wait ended")
	case <-time.After(15 * time.Second):
		t.Fatal("still waiting after the question was asked")
	}

	begin := time.Now()
	qs, err := e.m.List(ctx, api.CmdConfirmList{After: ptr(uint64(3)), WaitSeconds: ptr(uint64(1))})
	require.NoError(t, err)
	assert.Empty(t, qs)
	assert.GreaterOrEqual(t, time.Since(begin), 900*time.Millisecond, "waited its second")

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	_, err = e.m.List(cctx, api.CmdConfirmList{After: ptr(uint64(3)), WaitSeconds: ptr(uint64(20))})
	assert.ErrorIs(t, err, context.Canceled)
}

// TestStartStop: once started, the manager ticks on its own until Stop,
// which returns once it has stopped.
func TestStartStop(t *testing.T) {
	e := newEnv(t)
	a := e.ask("Run?", "", 0)
	e.clock.Advance(time.Minute)
	e.m.TickEvery = 10 * time.Millisecond
	require.NoError(t, e.m.Start(context.Background()))
	require.Eventually(t, func() bool { return e.question(a.ID).State == api.ConfirmWithdrawn },
		10*time.Second, 10*time.Millisecond)
	stopped := make(chan struct{})
	go func() {
		e.m.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	b := e.ask("after stop?", "", 0)
	e.clock.Advance(time.Minute)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, api.ConfirmPending, e.question(b.ID).State, "no tick after Stop")
}
