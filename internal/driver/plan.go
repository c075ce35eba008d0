// Package driver runs scripted work against a session: a plan (YAML, or JSON
// Lines on stdin) is a list of operations that each pass through the
// approval gate with source "script". Later drivers (agent, MCP) live here
// too.
package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Step is one operation of a plan.
type Step struct {
	// Line and Column locate the step in its file (1-based).
	Line   int `json:"line"`
	Column int `json:"column,omitempty"`
	// Op is exec, write, edit, read, upload, download, ls, glob or grep.
	Op string `json:"op"`

	Command string        `json:"command,omitempty"` // exec: shell string
	Argv    []string      `json:"argv,omitempty"`    // exec: argv form
	Cwd     string        `json:"cwd,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`

	Path    string `json:"path,omitempty"`
	Content string `json:"content,omitempty"`
	Old     string `json:"old,omitempty"`
	New     string `json:"new,omitempty"`
	All     bool   `json:"all,omitempty"`
	Force   bool   `json:"force,omitempty"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	Depth   int    `json:"depth,omitempty"`

	ContinueOnError bool `json:"continue_on_error,omitempty"`
}

// Target is what the step acts on, for messages.
func (s Step) Target() string {
	switch {
	case s.Command != "":
		return s.Command
	case len(s.Argv) > 0:
		return strings.Join(s.Argv, " ")
	case s.From != "":
		return s.From + " -> " + s.To
	case s.Pattern != "":
		return s.Pattern
	}
	return s.Path
}

// Plan is an ordered list of steps.
type Plan struct {
	Name  string
	Steps []Step
}

// PlanError locates a problem in a plan file.
type PlanError struct {
	File         string
	Line, Column int
	Msg          string
}

// Error formats as file:line:col: msg.
func (e *PlanError) Error() string {
	if e.Column > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// rawStep is the document shape shared by YAML and JSON.
type rawStep = map[string]any

var ops = map[string]bool{"exec": true, "write": true, "edit": true, "read": true, "upload": true, "download": true, "ls": true, "glob": true, "grep": true}

// ParsePlan parses a YAML plan: a mapping with a `steps` sequence.
func ParsePlan(name string, data []byte) (*Plan, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(name, err)
	}
	if len(doc.Content) == 0 {
		return nil, &PlanError{File: name, Line: 1, Msg: "empty plan: expected a mapping with a steps list"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &PlanError{File: name, Line: root.Line, Column: root.Column, Msg: "expected a mapping with a steps list"}
	}
	plan := &Plan{Name: name}
	var steps *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "steps" {
			return nil, &PlanError{File: name, Line: k.Line, Column: k.Column, Msg: fmt.Sprintf("unknown field %q (a plan has only steps)", k.Value)}
		}
		steps = v
	}
	if steps == nil || steps.Kind != yaml.SequenceNode {
		line, col := root.Line, root.Column
		if steps != nil {
			line, col = steps.Line, steps.Column
		}
		return nil, &PlanError{File: name, Line: line, Column: col, Msg: "steps must be a list"}
	}
	for _, n := range steps.Content {
		var raw rawStep
		if err := n.Decode(&raw); err != nil || n.Kind != yaml.MappingNode {
			return nil, &PlanError{File: name, Line: n.Line, Column: n.Column, Msg: "a step must be a mapping such as {exec: \"make\"}"}
		}
		st, err := buildStep(raw)
		if err != nil {
			line, col := n.Line, n.Column
			var fe fieldError
			if errors.As(err, &fe) {
				line, col = findKey(n, fe.field)
			}
			return nil, &PlanError{File: name, Line: line, Column: col, Msg: err.Error()}
		}
		st.Line, st.Column = n.Line, n.Column
		plan.Steps = append(plan.Steps, st)
	}
	if len(plan.Steps) == 0 {
		return nil, &PlanError{File: name, Line: steps.Line, Column: steps.Column, Msg: "the plan has no steps"}
	}
	return plan, nil
}

// findKey locates a key of a mapping node (or one nested a level down).
func findKey(n *yaml.Node, key string) (int, int) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line, n.Content[i].Column
		}
		if v := n.Content[i+1]; v.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(v.Content); j += 2 {
				if v.Content[j].Value == key {
					return v.Content[j].Line, v.Content[j].Column
				}
			}
		}
	}
	return n.Line, n.Column
}

// yamlError turns a yaml.v3 error ("yaml: line 3: ...") into a PlanError.
func yamlError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if after, ok := strings.CutPrefix(msg, "line "); ok {
		num, rest, _ := strings.Cut(after, ":")
		if line, err := strconv.Atoi(num); err == nil {
			return &PlanError{File: name, Line: line, Msg: strings.TrimSpace(rest)}
		}
	}
	return &PlanError{File: name, Line: 1, Msg: msg}
}

// ParseJSONL parses one step per line: {"exec":"make"}, blank lines skipped.
func ParseJSONL(name string, r io.Reader) (*Plan, error) {
	plan := &Plan{Name: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var raw rawStep
		dec := json.NewDecoder(bytes.NewReader(text))
		if err := dec.Decode(&raw); err != nil {
			col := 0
			var se *json.SyntaxError
			if errors.As(err, &se) {
				col = int(se.Offset)
			}
			return nil, &PlanError{File: name, Line: line, Column: col, Msg: "invalid JSON: " + err.Error()}
		}
		if dec.More() {
			return nil, &PlanError{File: name, Line: line, Msg: "one step per line"}
		}
		st, err := buildStep(raw)
		if err != nil {
			return nil, &PlanError{File: name, Line: line, Msg: err.Error()}
		}
		st.Line = line
		plan.Steps = append(plan.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(plan.Steps) == 0 {
		return nil, &PlanError{File: name, Line: max(line, 1), Msg: "the plan has no steps"}
	}
	return plan, nil
}

type fieldError struct {
	field string
	msg   string
}

func (e fieldError) Error() string { return e.msg }

// buildStep validates one decoded step.
func buildStep(raw rawStep) (Step, error) {
	var st Step
	for k, v := range raw {
		switch {
		case k == "continue_on_error":
			b, ok := v.(bool)
			if !ok {
				return st, fieldError{k, "continue_on_error must be true or false"}
			}
			st.ContinueOnError = b
		case ops[k]:
			if st.Op != "" {
				return st, fieldError{k, fmt.Sprintf("a step has one operation, found %s and %s", st.Op, k)}
			}
			st.Op = k
		default:
			return st, fieldError{k, fmt.Sprintf("unknown field %q (operations: exec, write, edit, read, upload, download, ls, glob, grep; or continue_on_error)", k)}
		}
	}
	if st.Op == "" {
		return st, errors.New("the step names no operation (exec, write, edit, read, upload, download, ls, glob, grep)")
	}
	if err := fillStep(&st, raw[st.Op]); err != nil {
		return st, err
	}
	return st, nil
}

// fillStep reads the operation's arguments: a string shorthand or a mapping.
func fillStep(st *Step, v any) error {
	op := st.Op
	if s, ok := v.(string); ok {
		switch op {
		case "exec":
			st.Command = s
		case "read", "ls":
			st.Path = s
		case "glob", "grep":
			st.Pattern = s
		default:
			return fieldError{op, fmt.Sprintf("%s takes a mapping, e.g. %s", op, example(op))}
		}
		return validate(st)
	}
	if list, ok := v.([]any); ok && op == "exec" {
		for _, a := range list {
			s, ok := a.(string)
			if !ok {
				return fieldError{op, "exec as a list takes strings only"}
			}
			st.Argv = append(st.Argv, s)
		}
		return validate(st)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fieldError{op, fmt.Sprintf("bad %s step; example: %s", op, example(op))}
	}
	for k, val := range m {
		if err := setField(st, k, val); err != nil {
			return err
		}
	}
	return validate(st)
}

func setField(st *Step, k string, val any) error {
	str := func(dst *string) error {
		s, ok := val.(string)
		if !ok {
			return fieldError{k, fmt.Sprintf("%s must be a string", k)}
		}
		*dst = s
		return nil
	}
	boolean := func(dst *bool) error {
		b, ok := val.(bool)
		if !ok {
			return fieldError{k, fmt.Sprintf("%s must be true or false", k)}
		}
		*dst = b
		return nil
	}
	strs := map[string]*string{
		"command": &st.Command, "cwd": &st.Cwd, "path": &st.Path, "content": &st.Content, "old": &st.Old,
		"new": &st.New, "from": &st.From, "to": &st.To, "pattern": &st.Pattern,
	}
	if dst, ok := strs[k]; ok {
		return str(dst)
	}
	switch k {
	case "all":
		return boolean(&st.All)
	case "force":
		return boolean(&st.Force)
	case "timeout":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fieldError{k, fmt.Sprintf("timeout %q is not a positive duration such as 30s", s)}
		}
		st.Timeout = d
		return nil
	case "depth":
		switch n := val.(type) {
		case int:
			st.Depth = n
		case float64:
			st.Depth = int(n)
		default:
			return fieldError{k, "depth must be a number"}
		}
		return nil
	}
	return fieldError{k, fmt.Sprintf("unknown field %q in %s; example: %s", k, st.Op, example(st.Op))}
}

func validate(st *Step) error {
	need := func(ok bool, what string) error {
		if !ok {
			return fieldError{st.Op, fmt.Sprintf("%s needs %s; example: %s", st.Op, what, example(st.Op))}
		}
		return nil
	}
	switch st.Op {
	case "exec":
		return need(st.Command != "" || len(st.Argv) > 0, "a command")
	case "write":
		return need(st.Path != "", "a path")
	case "edit":
		return need(st.Path != "" && st.Old != "", "a path and old text")
	case "read":
		return need(st.Path != "", "a path")
	case "upload", "download":
		return need(st.From != "" && st.To != "", "from and to")
	case "glob", "grep":
		return need(st.Pattern != "", "a pattern")
	}
	return nil
}

func example(op string) string {
	switch op {
	case "write":
		return `{path: /workspace/a.txt, content: "hi\n"}`
	case "edit":
		return `{path: /workspace/a.txt, old: "hi", new: "bye"}`
	case "upload":
		return `{from: ./src, to: /workspace/src}`
	case "download":
		return `{from: /workspace/out, to: ./out}`
	case "exec":
		return `"go test ./..."`
	case "grep":
		return `{pattern: "TODO", path: /workspace}`
	}
	return op + `: /workspace`
}
