package workspace

import (
	"os"

	"scv/control/api"
	"scv/reducer"
)

// Check checks that dir is an absolute path to an existing directory,
// with no control characters (a name that could rewrite the owner's
// terminal is refused, not displayed), and returns it cleaned: what is
// stored is what was checked.
func Check(dir string) (string, error) {
	dir, err := reducer.CleanWorkspace(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", api.Errorf(api.ErrInvalidArgument, "workspace %q is not an existing directory", dir)
	}
	return dir, nil
}
