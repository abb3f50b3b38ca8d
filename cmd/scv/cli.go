package main

import (
	"io"
)

// runClient runs a client command against the daemon.
func runClient(args []string, stdout, stderr io.Writer) error {
	return usageError{"unknown command " + args[0]}
}
