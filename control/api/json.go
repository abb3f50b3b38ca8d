package api

import "scv/reducer"

// marshal is reducer.Marshal: every JSON the daemon writes, stored or on
// the wire, is encoded by that one function.
func marshal(v any) ([]byte, error) { return reducer.Marshal(v) }
