package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"scv/reducer"
)

// jsonTree reads data as one JSON value. A field given twice in an
// object is refused, as the YAML reader refuses a key given twice.
func jsonTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsonValue(dec)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return v, nil
		}
		if err == nil {
			err = errors.New("more than one JSON value")
		}
	}
	return nil, jsonError(data, dec.InputOffset(), err)
}

// token reads the next token of a value of dec: the end of the input
// is too early.
func token(dec *json.Decoder) (json.Token, error) {
	tok, err := dec.Token()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return tok, err
}

// jsonValue reads the next value of dec.
func jsonValue(dec *json.Decoder) (any, error) {
	tok, err := token(dec)
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			k, err := token(dec)
			if err != nil {
				return nil, err
			}
			name := k.(string) // Token checks that a key is a string
			if _, dup := obj[name]; dup {
				return nil, fmt.Errorf("field %q given twice", name)
			}
			if obj[name], err = jsonValue(dec); err != nil {
				return nil, err
			}
		}
		_, err := token(dec) // '}'
		return obj, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := jsonValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := token(dec) // ']'
		return list, err
	}
	return tok, nil
}

// jsonError names the line and column of data where the reading
// stopped: at a syntax error's offset, or where the decoder was.
func jsonError(data []byte, offset int64, err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		offset = se.Offset
	}
	offset = min(offset, int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("JSON line %d, column %d: %v", line, col, err)
}

// yamlTree reads data as one YAML document of the values JSON holds.
// Anchors and aliases, tags of other types and a second document are
// refused.
func yamlTree(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty file")
		}
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); err != io.EOF {
		return nil, errors.New("more than one YAML document")
	}
	return yamlValue(&doc)
}

// yamlValue is n as a value JSON holds.
func yamlValue(n *yaml.Node) (any, error) {
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return nil, fmt.Errorf("YAML line %d: anchors and aliases are not read in a plan", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return yamlValue(n.Content[0])
	case yaml.MappingNode:
		obj := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, fmt.Errorf("YAML line %d: a key that is not a string", k.Line)
			}
			if _, dup := obj[k.Value]; dup {
				return nil, fmt.Errorf("YAML line %d: field %q given twice", k.Line, k.Value)
			}
			v, err := yamlValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			obj[k.Value] = v
		}
		return obj, nil
	case yaml.SequenceNode:
		list := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := yamlValue(c)
			if err != nil {
				return nil, err
			}
			list[i] = v
		}
		return list, nil
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp": // a date is its text, as in JSON
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, fmt.Errorf("YAML line %d: %v", n.Line, err)
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("YAML line %d: %q is not a number JSON holds", n.Line, n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return nil, fmt.Errorf("YAML line %d: a value of type %s", n.Line, n.Tag)
}

// decode makes a File of a tree parseTree read.
func decode(tree any) (*File, error) {
	top, ok := tree.(map[string]any)
	if !ok {
		return nil, invalid("not a plan: want an object with version and tasks, got %s", typeName(tree))
	}
	if err := known(top, "version", "tasks"); err != nil {
		return nil, invalid("%v", err)
	}
	v, ok := top["version"]
	if !ok {
		return nil, invalid("version is missing (want %d)", Version)
	}
	if n, err := integer(v); err != nil || n != Version {
		return nil, invalid("version: want %d, got %s", Version, show(v))
	}
	raw, ok := top["tasks"]
	if !ok {
		return nil, invalid("tasks is missing")
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, invalid("tasks: want a list, got %s", typeName(raw))
	}
	if len(list) > reducer.MaxPlanTasks {
		return nil, invalid("tasks has %d entries, more than %d", len(list), reducer.MaxPlanTasks)
	}
	f := &File{Version: Version}
	if len(list) > 0 {
		f.Tasks = make([]Task, len(list))
	}
	for i, raw := range list {
		if err := decodeTask(raw, &f.Tasks[i]); err != nil {
			where := fmt.Sprintf("tasks[%d]", i)
			if m, ok := raw.(map[string]any); ok {
				if k, ok := m["key"].(string); ok {
					where += fmt.Sprintf(" (key %q)", k)
				}
			}
			return nil, invalid("%s: %v", where, err)
		}
	}
	return f, nil
}

// taskFields are the fields of a task, in the order of Task.
var taskFields = []string{"key", "title", "description", "acceptance", "priority", "labels", "parent", "depends_on"}

// decodeTask fills t from raw, one task of the file.
func decodeTask(raw any, t *Task) error {
	m, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("want an object, got %s", typeName(raw))
	}
	if err := known(m, taskFields...); err != nil {
		return err
	}
	for _, name := range []string{"key", "title"} {
		if _, ok := m[name]; !ok {
			return fmt.Errorf("%s is missing", name)
		}
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"key", &t.Key}, {"title", &t.Title}, {"description", &t.Description}, {"acceptance", &t.Acceptance}, {"parent", &t.Parent}} {
		if v, ok := m[f.name]; ok {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%s: want a string, got %s", f.name, typeName(v))
			}
			*f.to = s
		}
	}
	if v, ok := m["priority"]; ok {
		n, err := integer(v)
		if err != nil {
			return fmt.Errorf("priority: %v", err)
		}
		t.Priority = &n
	}
	for _, f := range []struct {
		name string
		to   *[]string
	}{{"labels", &t.Labels}, {"depends_on", &t.DependsOn}} {
		if v, ok := m[f.name]; ok {
			s, err := stringList(v)
			if err != nil {
				return fmt.Errorf("%s%v", f.name, err)
			}
			*f.to = s
		}
	}
	return nil
}

// known refuses a field of m not among names, naming the first of them
// in order.
func known(m map[string]any, names ...string) error {
	var unknown []string
	for k := range m {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("unknown field %q (the fields are %v)", unknown[0], names)
}

// integer is v as an int: a number with no fraction. One past 32 bits
// is refused here, a smaller one out of range by the reducer.
func integer(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %s", typeName(v))
	}
	if i, err := strconv.ParseInt(string(n), 10, 32); err == nil {
		return int(i), nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) {
		return 0, fmt.Errorf("want an integer, got %s", n)
	}
	if f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("%s is out of range", n)
	}
	return int(f), nil
}

// stringList is v as a list of strings, nil when empty; an error's text
// follows the field's name ("[2]: ..." or ": ...").
func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(": want a list of strings, got %s", typeName(v))
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("[%d]: want a string, got %s", i, typeName(e))
		}
		out[i] = s
	}
	return out, nil
}

// typeName names the JSON type of v, for a refusal.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// show is v for a refusal: a number as it is, else its type.
func show(v any) string {
	if n, ok := v.(json.Number); ok {
		return string(n)
	}
	return typeName(v)
}
