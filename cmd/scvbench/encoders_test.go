package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMarshalPatchApplies: the encoder experiment's patch still finds the
// branch it turns off in today's control/server.go, once, inside
// appendResponse, which every reply goes through (appendReply's, and
// each of a batch's); a refactor that moves the branch fails here rather
// than in `make bench`.
func TestMarshalPatchApplies(t *testing.T) {
	dir, err := goListDir(context.Background(), "scv/control")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "server.go"))
	require.NoError(t, err)
	src := string(b)
	require.Equal(t, 1, strings.Count(src, encoderBranch), "the branch the patch turns off")
	patched, err := patchMarshal(src)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(patched, encoderPatch))
	require.NotContains(t, patched, encoderBranch)
	fn := patched[strings.Index(patched, encoderFunc):]
	fn = fn[:strings.Index(fn, "\n}\n")]
	require.Contains(t, fn, encoderPatch, "the patch lands in appendResponse")
	_, err = patchMarshal(strings.Replace(src, encoderBranch, "if r.Result == nil {", 1))
	require.Error(t, err, "a moved branch is reported")
}
