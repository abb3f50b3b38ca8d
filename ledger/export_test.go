package ledger

// SetFailpoints sets the failpoints as SCV_FAILPOINTS=spec would at
// process start, for an in-process test ("" clears them); it returns the
// undo. Tests that set failpoints must not run in parallel.
func SetFailpoints(spec string) (undo func(), err error) {
	m, err := parseFailpoints(spec)
	if err != nil {
		return nil, err
	}
	old := failpoints.Load()
	if m == nil {
		failpoints.Store(nil)
	} else {
		failpoints.Store(&m)
	}
	return func() { failpoints.Store(old) }, nil
}

// ParseFailpoints is the parser of SCV_FAILPOINTS; it returns the
// failpoints set, each with its action.
func ParseFailpoints(spec string) (map[Failpoint]string, error) {
	m, err := parseFailpoints(spec)
	if err != nil || m == nil {
		return nil, err
	}
	out := map[Failpoint]string{}
	for p, a := range m {
		for name, x := range failActions {
			if x == a {
				out[p] = name
			}
		}
	}
	return out, nil
}

// Pragma reads a pragma on the writer connection (which=w) or a reader
// connection (which=r).
func (l *Ledger) Pragma(which, name string) (string, error) {
	db := l.r
	if which == "w" {
		db = l.w
	}
	var v string
	err := db.Get(&v, "PRAGMA "+name)
	return v, err
}
