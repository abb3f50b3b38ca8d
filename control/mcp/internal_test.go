package mcp

import (
	"strings"
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

// TestCount: the requests and responses count finds in a message, or a
// batch, scanned or decoded, are what a decoder finds.
func TestCount(t *testing.T) {
	for _, c := range []struct {
		msg              string
		calls, responses int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"id":2,"method":"y"}}}`, 1, 0},
		{` {"jsonrpc":"2.0","method":"tools/call","id":"a"}` + "\n", 1, 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, 0},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, 0, 0},
		{`{"jsonrpc":"2.0","id":1,"method":null}`, 1, 0},
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"{\"id\":1,\"method\":\"x\"}"}],"structuredContent":{"method":1}}}`, 0, 1},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"\\"}}`, 0, 1},
		{`{"jsonrpc":"2.0","id":1,"m\u0065thod":"x"}`, 1, 0},
		{`{"jsonrpc":"2.0","\u0069d":1,"result":{}}`, 0, 1},
		{`{"jsonrpc":"2.0","identity":1,"methods":"x"}`, 0, 0},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","id":2,"result":{}}]`, 1, 1},
		{`{"jsonrpc":"2.0","id":1,"method":"a"`, 0, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"a"}}`, 0, 0},
		{``, 0, 0},
		{`null`, 0, 0},
	} {
		assert.Equal(t, c.calls, count([]byte(c.msg), true), "requests in %s", c.msg)
		assert.Equal(t, c.responses, count([]byte(c.msg), false), "responses in %s", c.msg)
		assert.Equal(t, countDecoded([]byte(strings.TrimSpace(c.msg)), true), count([]byte(c.msg), true), "as decoded: %s", c.msg)
		assert.Equal(t, countDecoded([]byte(strings.TrimSpace(c.msg)), false), count([]byte(c.msg), false), "as decoded: %s", c.msg)
	}
}
