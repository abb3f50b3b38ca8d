package control

// ValidJSON is validJSON, for the fuzz targets of control_test.
var ValidJSON = validJSON

// Waiting is how many waits (long polls) s is serving.
func Waiting(s *Server) int64 { return s.waiting.Load() }
