package imap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	goimap "github.com/emersion/go-imap"
	"github.com/emersion/go-imap/client"
	"github.com/emersion/go-imap/commands"
	"github.com/emersion/go-imap/responses"

	"scv/control/mail"
)

// mailbox is a mail.Mailbox: one connection, logged in, the INBOX
// examined. It never holds the password.
type mailbox struct {
	addr    Address
	raw     net.Conn // under TLS, if any
	c       *client.Client
	timeout time.Duration
	// idle: the server offers IDLE.
	idle bool
	// newMail holds a token when the server said EXISTS (or RECENT) since
	// the last Check or Wait took it.
	newMail chan struct{}
}

// watchUpdates hands the server's unilateral news on as newMail, until
// the connection ends. It never blocks the client's reader.
func (m *mailbox) watchUpdates(updates <-chan client.Update) {
	for {
		select {
		case u := <-updates:
			if _, ok := u.(*client.MailboxUpdate); ok {
				select {
				case m.newMail <- struct{}{}:
				default:
				}
			}
		case <-m.c.LoggedOut():
			return
		}
	}
}

// errorf is err of step, or ctx's error if ctx ended it.
func (m *mailbox) errorf(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("imap %s: %s: %w", m.addr, step, context.Cause(ctx))
	}
	return fmt.Errorf("imap %s: %s: %w", m.addr, step, err)
}

// op is one operation on the connection (a Dial, a Check, the end of an
// IDLE): each of its commands bounded by the timeout, all of them ended
// by the end of its context. Between operations the connection has no
// deadline (go-imap's own, Client.Timeout, stays 0: it would also bound
// the reader's wait for the server's next line, and so the time between
// two commands).
type op struct {
	m    *mailbox
	stop func() bool
	mu   sync.Mutex
	// canceled: ctx ended and the deadline is past; done: the op is over.
	canceled, done bool
}

// begin starts an op; end it with end.
func (m *mailbox) begin(ctx context.Context) *op {
	o := &op{m: m}
	o.stop = context.AfterFunc(ctx, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.done {
			o.canceled = true
			_ = m.raw.SetDeadline(time.Unix(1, 0))
		}
	})
	return o
}

// arm gives the next command the timeout.
func (o *op) arm() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.canceled {
		_ = o.m.raw.SetDeadline(time.Now().Add(o.m.timeout))
	}
}

// end ends the op: no deadline until the next.
func (o *op) end() {
	o.stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = true
	_ = o.m.raw.SetDeadline(time.Time{})
}

// noDeadlines is the connection as go-imap sees it: the deadlines are
// the ops'.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error      { return nil }
func (noDeadlines) SetReadDeadline(time.Time) error  { return nil }
func (noDeadlines) SetWriteDeadline(time.Time) error { return nil }

// Sections fetched of each mail: the header and the start of the text,
// both bounded.
const (
	// maxHeader is the most of a mail's header read; a longer header is
	// cut at its last whole line and the mail is Partial.
	maxHeader = 64 << 10
	// maxText is the most of a mail's body read (before decoding): enough
	// for the text of a multipart mail whose first part is its text, as
	// most are, and their HTML with its style sheets.
	maxText = 16 * mail.MaxMailText
)

var (
	headerSection = &goimap.BodySectionName{BodyPartName: goimap.BodyPartName{Specifier: goimap.HeaderSpecifier}, Peek: true, Partial: []int{0, maxHeader}}
	textSection   = &goimap.BodySectionName{BodyPartName: goimap.BodyPartName{Specifier: goimap.TextSpecifier}, Peek: true, Partial: []int{0, maxText}}
	// fetchItems are what Check fetches of each mail; fallbackItems what
	// it fetches of one the server would not give with them.
	fetchItems    = []goimap.FetchItem{goimap.FetchUid, goimap.FetchRFC822Size, goimap.FetchEnvelope, headerSection.FetchItem(), textSection.FetchItem()}
	fallbackItems = []goimap.FetchItem{goimap.FetchUid, goimap.FetchRFC822Size, goimap.FetchEnvelope}
)

// Check returns the INBOX's UIDVALIDITY and its mails above after, in UID
// order, at most limit of them (mail.MaxCheck when limit is not 1 to
// mail.MaxCheck). An error means the connection is lost (the end of ctx
// during a Check loses it too), or the server refused the search.
func (m *mailbox) Check(ctx context.Context, after uint32, limit int) (uint32, []mail.Mail, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	o := m.begin(ctx)
	defer o.end()
	if limit < 1 || limit > mail.MaxCheck {
		limit = mail.MaxCheck
	}
	// NOOP first: the server tells of the mail that came since.
	o.arm()
	if err := m.c.Noop(); err != nil {
		return 0, nil, m.errorf(ctx, "NOOP", err)
	}
	// What came after the NOOP is news for the next Wait.
	select {
	case <-m.newMail:
	default:
	}
	mbox := m.c.Mailbox()
	if mbox == nil {
		return 0, nil, fmt.Errorf("imap %s: the INBOX is no longer selected", m.addr)
	}
	validity := mbox.UidValidity
	if after == math.MaxUint32 {
		return validity, nil, nil
	}
	set := new(goimap.SeqSet)
	set.AddRange(after+1, 0) // after+1:*
	o.arm()
	found, err := m.c.UidSearch(&goimap.SearchCriteria{Uid: set})
	if err != nil {
		return 0, nil, m.errorf(ctx, "UID SEARCH", err)
	}
	// after+1:* holds the last mail even when its UID is not above after.
	uids := slices.DeleteFunc(found, func(uid uint32) bool { return uid <= after })
	slices.Sort(uids)
	uids = slices.Compact(uids)
	if len(uids) > limit {
		uids = uids[:limit]
	}
	if len(uids) == 0 {
		return validity, nil, nil
	}
	mails, err := m.fetch(ctx, o, uids)
	if err != nil {
		return 0, nil, err
	}
	return validity, mails, nil
}

// fetch reads the mails of uids, in that order. A mail the server would
// not give comes back Partial, with what it did give.
func (m *mailbox) fetch(ctx context.Context, o *op, uids []uint32) ([]mail.Mail, error) {
	o.arm()
	got, refused, err := m.uidFetch(uids, fetchItems)
	if err != nil {
		return nil, m.errorf(ctx, "UID FETCH", err)
	}
	mails := make([]mail.Mail, 0, len(uids))
	for _, uid := range uids {
		msg := got[uid]
		if msg == nil && refused != nil {
			// The batch was refused: this mail alone, without its text.
			o.arm()
			one, _, err := m.uidFetch([]uint32{uid}, fallbackItems)
			if err != nil {
				return nil, m.errorf(ctx, "UID FETCH", err)
			}
			msg = one[uid]
		}
		if msg == nil {
			// Expunged since the search, or refused whole.
			if refused == nil {
				continue
			}
			mails = append(mails, mail.Mail{UID: uid, Partial: true})
			continue
		}
		mails = append(mails, readMail(msg))
	}
	return mails, nil
}

// uidFetch runs UID FETCH of items for uids: the mails the server gave,
// its refusal (a NO or BAD), or err when the connection is lost.
func (m *mailbox) uidFetch(uids []uint32, items []goimap.FetchItem) (got map[uint32]*goimap.Message, refused *goimap.StatusResp, err error) {
	set := new(goimap.SeqSet)
	set.AddNum(uids...)
	ch := make(chan *goimap.Message, 16)
	type result struct {
		status *goimap.StatusResp
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := m.c.Execute(&commands.Uid{Cmd: &commands.Fetch{SeqSet: set, Items: items}},
			&responses.Fetch{Messages: ch, SeqSet: set, Uid: true})
		close(ch)
		done <- result{status, err}
	}()
	got = make(map[uint32]*goimap.Message, len(uids))
	for msg := range ch {
		if msg.Uid != 0 {
			got[msg.Uid] = msg
		}
	}
	r := <-done
	switch {
	case r.err != nil:
		return nil, nil, r.err
	case r.status == nil:
		return nil, nil, errors.New("the connection ended")
	case r.status.Type != goimap.StatusRespOk:
		return got, r.status, nil
	}
	return got, nil, nil
}

// Wait returns when the INBOX may have changed: at once if the server has
// told of new mail since the last Check; else when IDLE tells of it (the
// IDLE renewed every 25 minutes), or after poll (a minute if poll is not
// positive) where the server offers no IDLE. It returns ctx's error when
// ctx ends (the IDLE ended cleanly: the mailbox stays usable), and any
// other error when the connection is lost.
func (m *mailbox) Wait(ctx context.Context, poll time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-m.newMail:
		return nil
	default:
	}
	if m.idle {
		return m.idleWait(ctx)
	}
	if poll <= 0 {
		poll = time.Minute
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-m.newMail:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-m.c.LoggedOut():
		return fmt.Errorf("imap %s: the connection is lost", m.addr)
	}
}

func (m *mailbox) idleWait(ctx context.Context) error {
	stop := make(chan struct{})
	done := make(chan error, 1)
	// No deadline while idling: the server may be silent for long (TCP
	// keep alives find a server gone).
	go func() { done <- m.c.Idle(stop, &client.IdleOptions{LogoutTimeout: idleRestart}) }()
	var woken error
	select {
	case err := <-done:
		if err == nil {
			err = errors.New("IDLE ended")
		}
		return m.errorf(context.Background(), "IDLE", err)
	case <-m.newMail:
	case <-ctx.Done():
		woken = ctx.Err()
	}
	close(stop)
	// DONE, and the server's answer within the usual time.
	o := m.begin(context.Background())
	defer o.end()
	o.arm()
	if err := <-done; err != nil {
		return m.errorf(context.Background(), "IDLE", err)
	}
	return woken
}

// Close logs out (waiting a few seconds at most) and closes the
// connection.
func (m *mailbox) Close() error {
	defer m.raw.Close()
	select {
	case <-m.c.LoggedOut():
		return nil
	default:
	}
	_ = m.raw.SetDeadline(time.Now().Add(logoutTimeout))
	if err := m.c.Logout(); err != nil && !errors.Is(err, client.ErrAlreadyLoggedOut) {
		return fmt.Errorf("imap %s: LOGOUT: %w", m.addr, err)
	}
	return nil
}
