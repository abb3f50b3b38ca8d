package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/reducer"
)

// Limits of what only the MCP server has.
const (
	// maxEvents is the most project_events returns, one page of the
	// daemon's; defaultEvents, what it returns when not told.
	maxEvents, defaultEvents = reducer.MaxEventsPage, 100
	// maxWait bounds owner_ask's wait_seconds.
	maxWait = 600
)

// argLimit is the bound of an argument. chars (of a string, or of each
// string of an array) and items (of an array) are the daemon's: the
// input schema advertises them (maxLength, maxItems) and the daemon
// refuses what passes them, as it does on the socket. max (of a number,
// whose least is 0) and oneOf (the words a string may be) are the
// server's own: the schema says them (maximum, enum) and checkArgs holds
// a call to them.
type argLimit struct {
	chars, items int
	max          int
	oneOf        []string
}

// argLimits are the bounds of the tools' arguments, by name: an argument
// means the same in every tool that takes it.
var argLimits = map[string]argLimit{
	"project":         {chars: reducer.MaxRefLen},
	"task":            {chars: reducer.MaxRefLen},
	"run":             {chars: reducer.MaxRefLen},
	"depends_on":      {chars: reducer.MaxRefLen, items: reducer.MaxDependsOn},
	"title":           {chars: reducer.MaxNameLen},
	"description":     {chars: reducer.MaxDescriptionLen},
	"acceptance":      {chars: reducer.MaxAcceptanceLen},
	"labels":          {chars: reducer.MaxLabelLen, items: reducer.MaxLabels},
	"parent":          {chars: reducer.MaxRefLen},
	"discovered_from": {chars: reducer.MaxRefLen},
	"priority":        {max: reducer.MaxPriority},
	"agent":           {chars: reducer.MaxNameLen},
	"progress":        {chars: reducer.MaxProgressLen},
	"reason":          {chars: reducer.MaxReasonLen},
	"question":        {chars: reducer.MaxQuestionLen},
	"limit":           {max: maxEvents},
	"wait_seconds":    {max: maxWait},
	"status":          {oneOf: []string{string(reducer.RunSucceeded), string(reducer.RunFailed), string(reducer.RunCancelled)}},
}

// Tool annotations: what each kind of tool does to the ledger.
var (
	readOnly   = &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	writes     = &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	idempotent = &sdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}
	ends       = &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}
	// asks goes to the owner, out of the ledger's world.
	asks = &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}
)

func ptr[T any](v T) *T { return &v }

// tool adds a tool whose input schema is In's, with argLimits, and whose
// output schema is Out's. A call's arguments are checked by checkArgs,
// which names the argument and what it wants and never repeats its value
// (invalid_argument), before they are decoded and h runs; h's error is
// the tool's (toolError). What h returns is the result's structured
// content and, as JSON, its text. It is not checked against the output
// schema on each call: Out is the schema's own type, and the tests check
// every result they get against the schema the server advertises
// (docs/performance.md, MCP: the check cost more than the tool's own
// work).
func tool[In, Out any](m *server, name, title, desc string, ann *sdk.ToolAnnotations,
	h func(ctx context.Context, req *sdk.CallToolRequest, in In) (Out, error)) {
	in, check := inputSchema[In](name)
	a := *ann
	a.Title = title
	m.srv.AddTool(&sdk.Tool{Name: name, Title: title, Description: desc, Annotations: &a, InputSchema: in, OutputSchema: schemaOf[Out](name)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			args, err := checkArgs(check, req.Params.Arguments)
			if err != nil {
				return errorResult(err), nil
			}
			var v In
			if err := json.Unmarshal(args, &v); err != nil {
				field := "arguments"
				if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) && te.Field != "" {
					field = te.Field
				}
				return errorResult(refused("%s: out of range", field)), nil
			}
			o, err := h(ctx, req, v)
			if err != nil {
				return errorResult(err), nil
			}
			b, err := json.Marshal(o)
			if err != nil {
				return nil, fmt.Errorf("tool %s: output: %w", name, err)
			}
			return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
		})
}

// errorResult is a tool's result for err.
func errorResult(err error) *sdk.CallToolResult {
	res := &sdk.CallToolResult{}
	res.SetError(toolError(err))
	return res
}

// schemaOf is T's JSON Schema.
func schemaOf[T any](tool string) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", tool, err))
	}
	return s
}

// argCheck is what checkArgs holds a call to: the input schema with the
// server's own limits only.
type argCheck struct {
	s *jsonschema.Schema
}

// inputSchema is In's schema as tools/list gives it, with every limit of
// argLimits, and the check of a call, with the server's own only.
func inputSchema[In any](tool string) (*jsonschema.Schema, argCheck) {
	advertised, own := schemaOf[In](tool), schemaOf[In](tool)
	limit(advertised, true)
	limit(own, false)
	if err := checkable(own); err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", tool, err))
	}
	return advertised, argCheck{own}
}

// checkedKeywords are the keywords of JSON Schema that checkValue holds
// a value to, and the ones that check nothing.
var checkedKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "minimum": true, "maximum": true,
	"description": true, "title": true,
}

// checkedTypes are the JSON types checkValue tells apart.
var checkedTypes = map[string]bool{"string": true, "integer": true, "boolean": true, "object": true, "array": true, "null": true}

// checkable says whether checkValue holds a value to everything schema
// s asks, so that no general validator need run on each call: s's every
// keyword is one of checkedKeywords, its every type one of checkedTypes,
// and its objects take no properties but theirs.
func checkable(s *jsonschema.Schema) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var walk func(path string, v map[string]any) error
	walk = func(path string, v map[string]any) error {
		for k, sub := range v {
			if !checkedKeywords[k] {
				return fmt.Errorf("%s: keyword %s is not checked by checkValue", path, k)
			}
			switch k {
			case "type":
				types, ok := sub.([]any)
				if !ok {
					types = []any{sub}
				}
				for _, t := range types {
					if name, _ := t.(string); !checkedTypes[name] {
						return fmt.Errorf("%s: type %v is not checked by checkValue", path, t)
					}
				}
			case "additionalProperties":
				if sub != false {
					return fmt.Errorf("%s: additionalProperties is not false", path)
				}
			case "items":
				if err := walk(path+"[]", sub.(map[string]any)); err != nil {
					return err
				}
			case "properties":
				for name, p := range sub.(map[string]any) {
					if err := walk(path+"."+name, p.(map[string]any)); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return walk("arguments", v)
}

// limit puts argLimits in s: the server's own, and the daemon's too if
// daemons.
func limit(s *jsonschema.Schema, daemons bool) {
	for field, p := range s.Properties {
		if field == "usage" {
			limitUsage(p, daemons)
			continue
		}
		l, ok := argLimits[field]
		if !ok {
			continue
		}
		switch {
		case typed(p, "string") && l.oneOf != nil:
			for _, w := range l.oneOf {
				p.Enum = append(p.Enum, w)
			}
		case typed(p, "string") && daemons:
			p.MaxLength = ptr(l.chars)
		case typed(p, "array") && daemons:
			p.MaxItems, p.Items.MaxLength = ptr(l.items), ptr(l.chars)
		case typed(p, "integer") && l.max != 0:
			p.Minimum, p.Maximum = ptr(0.0), ptr(float64(l.max))
		}
	}
}

// limitUsage puts in p, the schema of a run's usage (reducer.Usage), the
// reducer's limits of it: the daemon's, when daemons, but that token
// counts are not negative, which any schema of them says.
func limitUsage(p *jsonschema.Schema, daemons bool) {
	for _, k := range p.Properties["tokens"].Properties {
		k.Minimum = ptr(0.0)
		if daemons {
			k.Maximum = ptr(float64(reducer.MaxTokens))
		}
	}
	if !daemons {
		return
	}
	cost := p.Properties["cost"]
	cost.Properties["amount"].MaxLength = ptr(reducer.MaxCostLen)
	cost.Properties["amount"].Pattern = fmt.Sprintf(`^[0-9]+(\.[0-9]{1,%d})?$`, reducer.MaxCostPlaces)
	cost.Properties["currency"].Pattern = `^[A-Z]{3}$`
	p.Properties["model"].MaxLength = ptr(reducer.MaxModelLen)
}

// typed says whether schema p allows JSON values of type t.
func typed(p *jsonschema.Schema, t string) bool {
	return p.Type == t || slices.Contains(p.Types, t)
}

// checkArgs checks a call's arguments against c, and returns them as a
// JSON object. What it refuses, it refuses naming the argument and what
// it wants, never repeating the value: a required argument missing, one
// the tool does not take, a value of another type (null too), a number
// beyond its bounds, a word not among its words. That is all the schema
// asks (checkable): no general validator runs on each call.
func checkArgs(c argCheck, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var args map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &args) != nil {
		return nil, refused("arguments: want a JSON object")
	}
	for _, name := range c.s.Required {
		if _, ok := args[name]; !ok {
			return nil, refused("%s: required", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(args)) {
		p, ok := c.s.Properties[name]
		if !ok {
			return nil, refused("%s: not an argument of this tool, which takes %s", clip(name, 64),
				strings.Join(slices.Sorted(maps.Keys(c.s.Properties)), ", "))
		}
		if err := checkValue(name, p, args[name]); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// checkValue checks the value of argument field against its schema p.
func checkValue(field string, p *jsonschema.Schema, raw json.RawMessage) error {
	null := bytes.Equal(raw, []byte("null"))
	if null && typed(p, "null") {
		return nil
	}
	switch {
	case typed(p, "string"):
		var v string
		if null || json.Unmarshal(raw, &v) != nil {
			return refused("%s: want a string", field)
		}
		if p.Enum != nil && !slices.Contains(p.Enum, any(v)) {
			words := make([]string, len(p.Enum))
			for i, w := range p.Enum {
				words[i] = fmt.Sprint(w)
			}
			return refused("%s: want one of %s", field, strings.Join(words, ", "))
		}
	case typed(p, "integer"):
		var v float64
		if null || json.Unmarshal(raw, &v) != nil || v != math.Trunc(v) {
			return refused("%s: want a whole number", field)
		}
		if p.Minimum != nil && v < *p.Minimum || p.Maximum != nil && v > *p.Maximum {
			return refused("%s: want %s", field, bounds(p))
		}
	case typed(p, "boolean"):
		var v bool
		if null || json.Unmarshal(raw, &v) != nil {
			return refused("%s: want true or false", field)
		}
	case typed(p, "object"):
		var v map[string]json.RawMessage
		if null || json.Unmarshal(raw, &v) != nil || v == nil {
			return refused("%s: want an object", field)
		}
		for _, name := range p.Required {
			if _, ok := v[name]; !ok {
				return refused("%s.%s: required", field, name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(v)) {
			q, ok := p.Properties[name]
			if !ok {
				return refused("%s.%s: not a field of %s, which has %s", field, clip(name, 64), field,
					strings.Join(slices.Sorted(maps.Keys(p.Properties)), ", "))
			}
			if err := checkValue(field+"."+name, q, v[name]); err != nil {
				return err
			}
		}
	case typed(p, "array"):
		var v []json.RawMessage
		if null || json.Unmarshal(raw, &v) != nil {
			return refused("%s: want an array", field)
		}
		for i, e := range v {
			if p.Items == nil {
				break
			}
			if err := checkValue(fmt.Sprintf("%s[%d]", field, i), p.Items, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// bounds says the range of numbers p allows.
func bounds(p *jsonschema.Schema) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	switch {
	case p.Minimum != nil && p.Maximum != nil:
		return f(*p.Minimum) + " to " + f(*p.Maximum)
	case p.Minimum != nil:
		return "at least " + f(*p.Minimum)
	}
	return "at most " + f(*p.Maximum)
}

// clip is s, cut to n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
