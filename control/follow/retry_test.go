package follow

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRetryPause: the pause before each retry doubles from FirstRetry up
// to MaxRetry, less a random part of up to half.
func TestRetryPause(t *testing.T) {
	t.Parallel()
	full := FirstRetry
	for n := range 100 {
		for range 20 {
			d := retryPause(n)
			assert.LessOrEqual(t, d, full, "retry %d", n)
			assert.GreaterOrEqual(t, d, full/2, "retry %d", n)
		}
		full = min(2*full, MaxRetry)
	}
}
