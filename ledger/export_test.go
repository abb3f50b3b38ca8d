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
