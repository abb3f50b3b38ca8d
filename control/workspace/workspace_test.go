package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/workspace"
)

// An existing directory passes, cleaned; anything else is refused as an
// invalid argument naming the path.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))

	got, err := workspace.Check(dir + "/./sub/..")
	require.NoError(t, err)
	assert.Equal(t, dir, got, "cleaned")

	for _, tc := range []struct{ dir, msg string }{
		{filepath.Join(dir, "nope"), `workspace "` + filepath.Join(dir, "nope") + `" is not an existing directory`},
		{file, `workspace "` + file + `" is not an existing directory`},
		{"relative", `invalid argument: workspace "relative" is not an absolute path`},
		{dir + "/\x1b[2J", `invalid argument: workspace "` + dir + `/\x1b[2J" contains a control character`},
	} {
		_, err := workspace.Check(tc.dir)
		require.ErrorIs(t, err, api.ErrInvalidArgument, tc.dir)
		assert.Equal(t, tc.msg, err.Error())
		assert.Equal(t, api.ReasonInvalidArgument, api.ErrorOf(err).Data.Reason)
	}
}
