package api

import (
	"os"

	"scv/reducer"
)

// CheckWorkspace checks that dir is an absolute path to an existing
// directory, with no control characters (a name that could rewrite the
// owner's terminal is refused, not displayed), and returns it cleaned:
// what is stored is what was checked.
func CheckWorkspace(dir string) (string, error) {
	dir, err := reducer.CleanWorkspace(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", Errorf(ErrInvalidArgument, "workspace %q is not an existing directory", dir)
	}
	return dir, nil
}
