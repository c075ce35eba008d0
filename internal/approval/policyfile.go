package approval

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadPolicy reads a policy file (see ParsePolicy).
func LoadPolicy(file string) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return ParsePolicy(file, data)
}

// PolicyError is a problem in a policy file, with its position.
type PolicyError struct {
	File string
	// Line and Col are 1-based; Col is 0 when unknown.
	Line, Col int
	Msg       string
}

// Error formats as "file:line:col: msg".
func (e *PolicyError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Col == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
}

// ParsePolicy parses a policy file named name:
//
//	default: ask          # ask | allow | deny, for kinds other than read and list
//	allow: ["exec:go test *", "write:/workspace/**"]
//	deny:  ["exec:rm *", "download:*"]
//	ask:   ["write:/workspace/.git/**"]
//
// Each list may also be a single string. Unknown fields, duplicate fields
// and malformed rules are errors of type *PolicyError that name
// file:line:col. Rules carry origins such as `policy.yaml:4: deny "exec:rm *"`.
func ParsePolicy(name string, data []byte) (p *Policy, err error) {
	defer func() {
		// The YAML decoder is fed untrusted files; never let it crash us.
		if r := recover(); r != nil {
			p, err = nil, &PolicyError{File: name, Msg: fmt.Sprintf("malformed YAML: %v", r)}
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		// The decoder reports "yaml: line N: problem".
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			num, text, _ := strings.Cut(rest, ": ")
			if line, err := strconv.Atoi(num); err == nil {
				return nil, &PolicyError{File: name, Line: line, Msg: text}
			}
		}
		return nil, &PolicyError{File: name, Msg: msg}
	}
	p = &Policy{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return p, nil // an empty file
	}
	root := resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return p, nil
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return &PolicyError{File: name, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
	}
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "want a mapping with the fields default, allow, deny and ask")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := resolve(root.Content[i]), resolve(root.Content[i+1])
		key := k.Value
		if seen[key] {
			return nil, at(k, "field %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "default":
			if v.Kind != yaml.ScalarNode {
				return nil, at(v, "default: want ask, allow or deny")
			}
			switch e := Effect(v.Value); e {
			case Ask, Allow, Deny:
				p.Default = e
				p.DefaultOrigin = fmt.Sprintf("%s:%d: default %s", name, v.Line, e)
			default:
				return nil, at(v, "default: %q is not ask, allow or deny", v.Value)
			}
		case "allow", "deny", "ask":
			var items []*yaml.Node
			switch v.Kind {
			case yaml.ScalarNode:
				if v.Tag != "!!null" {
					items = []*yaml.Node{v}
				}
			case yaml.SequenceNode:
				items = v.Content
			default:
				return nil, at(v, "%s: want a list of rules such as %q", key, "exec:go test *")
			}
			for j, item := range items {
				item = resolve(item)
				if item.Kind != yaml.ScalarNode {
					return nil, at(item, "%s[%d]: want a rule string such as %q", key, j, "exec:go test *")
				}
				r, err := ParseRule(item.Value)
				if err != nil {
					return nil, at(item, "%s[%d]: %v", key, j, err)
				}
				pr := PolicyRule{Rule: r, Origin: fmt.Sprintf("%s:%d: %s %s", name, item.Line, key, quoteFlagValue(r.String())), By: "policy"}
				switch key {
				case "allow":
					p.Allow = append(p.Allow, pr)
				case "deny":
					p.Deny = append(p.Deny, pr)
				default:
					p.Ask = append(p.Ask, pr)
				}
			}
		default:
			return nil, at(k, "unknown field %q: want default, allow, deny or ask", key)
		}
	}
	return p, nil
}

// resolve follows YAML aliases (bounded, in case of cycles).
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{}
	}
	return n
}
