package ledger

// Queued is how many requests wait in l's queue, not yet taken into a
// transaction: for tests that order the queue.
func (l *Ledger) Queued() int {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return len(l.queue)
}
