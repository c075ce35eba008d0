package tui

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	tea "github.com/charmbracelet/bubbletea"
	"gopkg.in/yaml.v3"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/output"
)

// noteRules records where the session rules of an answer came from, for
// /rules.
func (m *model) noteRules(req approval.Request, d approval.Decision) {
	from := output.Escape(fmt.Sprintf("your answer to %s %s", req.Kind, req.Target))
	for _, r := range append([]string{d.SessionRule}, d.SessionRules...) {
		if r != "" {
			if m.ruleFrom == nil {
				m.ruleFrom = map[string]string{}
			}
			m.ruleFrom[r] = from
		}
	}
}

// rulesCmd is /rules [revoke N | save N FILE].
func (m *model) rulesCmd(c command) tea.Cmd {
	g := m.session.Gate()
	rules := g.SessionRules()
	pick := func(arg string) (string, bool) {
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > len(rules) {
			m.sb.add(kindError, fmt.Sprintf("no session rule %s: /rules lists them, numbered from 1", arg))
			return "", false
		}
		return rules[n-1], true
	}
	switch {
	case len(c.args) == 0:
		if len(rules) == 0 {
			m.sb.add(kindInfo, "no session rules: a dialog's [s] adds one")
			return nil
		}
		m.sb.add(kindInfo, "session rules (/rules revoke N drops one; /rules save N FILE adds it to a policy file):")
		for i, r := range rules {
			from := m.ruleFrom[r]
			if from == "" {
				from = "added for this session"
			}
			m.sb.add(kindStdout, fmt.Sprintf("  %d. allow %s — %s", i+1, output.Escape(r), from))
		}
		return nil
	case c.args[0] == "revoke" && len(c.args) == 2:
		if r, ok := pick(c.args[1]); ok && g.RevokeSessionRule(r) {
			m.sb.add(kindOK, "revoked the session rule allow "+output.Escape(r))
		}
		return nil
	case c.args[0] == "save" && len(c.args) == 3:
		r, ok := pick(c.args[1])
		if !ok {
			return nil
		}
		file := c.args[2]
		return func() tea.Msg {
			return savedRuleMsg{rule: r, file: file, err: saveAllowRule(file, r)}
		}
	}
	m.sb.add(kindError, "usage: "+usageOf("rules"))
	return nil
}

// savedRuleMsg says a rule was added to a policy file.
type savedRuleMsg struct {
	rule, file string
	err        error
}

func (m *model) savedRule(msg savedRuleMsg) {
	if msg.err != nil {
		m.sb.add(kindError, msg.err.Error())
		return
	}
	m.sb.add(kindOK, fmt.Sprintf("added allow %s to %s; --policy %s applies it to later runs", output.Escape(msg.rule), output.Escape(msg.file), output.Escape(msg.file)))
}

// saveAllowRule adds rule to the allow list of the policy file (created
// when missing), keeping the rest of the file, and checks the result
// still parses as a policy.
func saveAllowRule(file, rule string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("policy file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("policy file %s: %w", file, err)
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("policy file %s is not a mapping of default, allow, deny and ask", file)
	}
	item := &yaml.Node{Kind: yaml.ScalarNode, Value: rule, Style: yaml.DoubleQuotedStyle}
	found := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "allow" {
			continue
		}
		list := root.Content[i+1]
		if list.Kind == yaml.ScalarNode { // a single rule: make it a list
			*list = yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: list.Value, Style: yaml.DoubleQuotedStyle}}}
		}
		list.Content = append(list.Content, item)
		found = true
	}
	if !found {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "allow"}, &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{item}})
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return fmt.Errorf("policy file %s: %w", file, err)
	}
	if _, err := approval.ParsePolicy(file, out); err != nil {
		return fmt.Errorf("the rule would break the policy file: %w", err)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	return nil
}
