package mcp

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckable: a call's arguments are held to their schema by
// checkValue alone, so a schema with a keyword it does not check, or an
// object open to other properties, is refused when the tool is added;
// every tool's own schema is checkable.
func TestCheckable(t *testing.T) {
	for _, f := range []func(string) (*jsonschema.Schema, argCheck){
		inputSchema[projectIn], inputSchema[projectListIn], inputSchema[eventsIn], inputSchema[claimIn],
		inputSchema[progressIn], inputSchema[runIn], inputSchema[finishIn], inputSchema[taskAddIn],
		inputSchema[taskGetIn], inputSchema[taskNextIn], inputSchema[askIn], inputSchema[askStatusIn],
	} {
		_, c := f("t")
		require.NoError(t, checkable(c.s))
	}

	_, c := inputSchema[progressIn]("t")
	c.s.Properties["progress"].MinLength = ptr(1)
	assert.ErrorContains(t, checkable(c.s), "arguments.progress: keyword minLength")

	_, c = inputSchema[progressIn]("t")
	c.s.Properties["usage"].Properties["cost"].Properties["currency"].Pattern = "^[A-Z]{3}$"
	assert.ErrorContains(t, checkable(c.s), "arguments.usage.cost.currency: keyword pattern")

	_, c = inputSchema[taskAddIn]("t")
	c.s.Properties["labels"].Items.Format = "email"
	assert.ErrorContains(t, checkable(c.s), "arguments.labels[]: keyword format")

	_, c = inputSchema[progressIn]("t")
	c.s.AdditionalProperties = &jsonschema.Schema{}
	assert.ErrorContains(t, checkable(c.s), "arguments: additionalProperties is not false")

	assert.PanicsWithValue(t, "mcp tool t: arguments.n: type number is not checked by checkValue", func() {
		inputSchema[struct {
			N float64 `json:"n"`
		}]("t")
	})
}
