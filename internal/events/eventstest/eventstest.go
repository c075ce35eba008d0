// Package eventstest checks, in tests, that events follow the schema of
// package events.
package eventstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentbox/sandbox/internal/events"
)

// schemaURL is where the schema is registered with the compiler: its $id.
const schemaURL = "https://github.com/agentbox/sandbox/internal/events/schema.json"

// Validator checks encoded events against the schema.
type Validator struct{ schema, sandbox *jsonschema.Schema }

// New compiles the schema; it fails tb when the schema does not compile.
func New(tb testing.TB) *Validator {
	tb.Helper()
	v, err := Compile()
	if err != nil {
		tb.Fatalf("compile the event schema: %v", err)
	}
	return v
}

// Compile compiles the schema into a Validator.
func Compile() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(events.Schema()))
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	sb, err := c.Compile(schemaURL + "#/$defs/sandbox")
	if err != nil {
		return nil, fmt.Errorf("compile the sandbox object: %w", err)
	}
	return &Validator{schema: s, sandbox: sb}, nil
}

// Line checks one encoded event.
func (v *Validator) Line(line []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return fmt.Errorf("event %s: %w", line, err)
	}
	if err := v.schema.Validate(doc); err != nil {
		return fmt.Errorf("event %s: %w", line, err)
	}
	return nil
}

// Sandbox checks an encoded sandbox object (DESIGN §4: what sandbox.*
// events carry and `create --json` prints), or, with array set, an array
// of them (`list --json`).
func (v *Validator) Sandbox(data []byte, array bool) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", data, err)
	}
	docs := []any{doc}
	if array {
		list, ok := doc.([]any)
		if !ok {
			return fmt.Errorf("sandbox list %s: not an array", data)
		}
		docs = list
	}
	for _, d := range docs {
		if err := v.sandbox.Validate(d); err != nil {
			return fmt.Errorf("sandbox %s: %w", data, err)
		}
	}
	return nil
}

// Lines checks every non-empty line of JSON Lines and returns the events
// decoded; it fails tb at the first event that does not follow the schema.
func (v *Validator) Lines(tb testing.TB, data []byte) []events.Event {
	tb.Helper()
	var out []events.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := v.Line(line); err != nil {
			tb.Fatal(err)
		}
		var ev events.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			tb.Fatalf("decode %s: %v", line, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}
