package ledger

// SetCompactFailpoint makes compaction fail after the step for which f
// returns an error, as a crash there would; it returns the undo.
func SetCompactFailpoint(f func(step string) error) func() {
	old := compactFailpoint
	compactFailpoint = f
	return func() { compactFailpoint = old }
}
