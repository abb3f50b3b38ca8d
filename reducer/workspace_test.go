package reducer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// The workspace's form is checked once, here: control calls
// CleanWorkspace before it looks at the disk, and Decide refuses what
// CleanWorkspace would have changed.
func TestWorkspaceForm(t *testing.T) {
	for _, tc := range []struct {
		dir, clean string
		ok         bool
	}{
		{"/w/a", "/w/a", true},
		{"/w/./a/../b/", "/w/b", true},
		{"w/a", "", false},
		{"", "", false},
		{"/w/a\nb", "", false},
		{"/w/\x1b[2J", "", false},
	} {
		got, err := reducer.CleanWorkspace(tc.dir)
		if !tc.ok {
			require.ErrorIs(t, err, reducer.ErrInvalidArgument, "%q", tc.dir)
		} else {
			require.NoError(t, err, "%q", tc.dir)
			assert.Equal(t, tc.clean, got)
		}
		_, err = reducer.Decide(nil, reducer.CreateProject{ProjectID: "P", Name: "n", Workspace: tc.dir, Now: 1})
		if tc.ok && tc.clean == tc.dir {
			assert.NoError(t, err, "%q", tc.dir)
		} else {
			assert.ErrorIs(t, err, reducer.ErrInvalidArgument, "%q is not stored as given", tc.dir)
		}
	}
}
