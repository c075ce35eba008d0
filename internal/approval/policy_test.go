package approval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testPolicy builds a policy from a YAML text and flag rules.
func testPolicy(t *testing.T, yamlText string, allow, deny []string, yes bool) *Policy {
	t.Helper()
	p, err := ParsePolicy("policy.yaml", []byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range allow {
		if err := p.AddAllow(r, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range deny {
		if err := p.AddDeny(r, ""); err != nil {
			t.Fatal(err)
		}
	}
	p.Yes = yes
	return p
}

func TestPolicyEvaluate(t *testing.T) {
	t.Parallel()
	const file = `default: ask
allow: ["exec:go test *", "write:/workspace/**"]
deny:
  - "exec:rm *"
  - "download:*"
ask: ["write:/workspace/.git/**"]
`
	ex := func(src Source, cmd string) Request { return Request{Source: src, Kind: KindExec, Target: cmd} }
	pa := func(src Source, k Kind, p string) Request { return Request{Source: src, Kind: k, Target: p} }
	tests := []struct {
		name       string
		yaml       string
		allow      []string
		deny       []string
		yes        bool
		req        Request
		want       Effect
		wantOrigin string // substring
	}{
		// Built-in defaults.
		{name: "default read", req: pa(SourceAgent, KindRead, "/etc/passwd"), want: Allow, wantOrigin: "read and list"},
		{name: "default list", req: pa(SourceScript, KindList, "/"), want: Allow},
		{name: "default user exec", req: ex(SourceUser, "rm -rf /"), want: Allow, wantOrigin: "user"},
		{name: "default empty source is user", req: ex("", "ls"), want: Allow},
		{name: "default agent exec", req: ex(SourceAgent, "ls"), want: Ask, wantOrigin: "agent requests need approval"},
		{name: "default script write", req: pa(SourceScript, KindWrite, "/workspace/x"), want: Ask},
		{name: "default mcp upload", req: pa(SourceMCP, KindUpload, "/workspace"), want: Ask},
		{name: "default setup exec", req: ex(SourceSetup, "make"), want: Ask},
		// Policy file.
		{name: "file allow", yaml: file, req: ex(SourceAgent, "go test ./..."), want: Allow, wantOrigin: `policy.yaml:2: allow "exec:go test *"`},
		{name: "file deny", yaml: file, req: ex(SourceAgent, "rm -rf /"), want: Deny, wantOrigin: `policy.yaml:4: deny "exec:rm *"`},
		{name: "file deny any segment", yaml: file, req: ex(SourceAgent, "go test ./... && rm -rf /"), want: Deny},
		{name: "file deny in substitution", yaml: file, req: ex(SourceAgent, "echo $(rm -rf /)"), want: Deny},
		{name: "file deny complex words", yaml: file, req: ex(SourceAgent, "rm -rf $HOME"), want: Deny},
		{name: "file deny through sudo", yaml: file, req: ex(SourceAgent, "sudo -u root rm -rf /"), want: Deny},
		{name: "file deny through sh -c", yaml: file, req: ex(SourceAgent, `bash -lc "cd / && rm -rf x"`), want: Deny},
		{name: "file deny through path", yaml: file, req: ex(SourceAgent, "/bin/rm x"), want: Deny},
		{name: "file deny through xargs", yaml: file, req: ex(SourceAgent, "find . | xargs rm"), want: Deny},
		{name: "file deny argv", yaml: file, req: Request{Source: SourceAgent, Kind: KindExec, Argv: []string{"rm", "x"}}, want: Deny},
		{name: "file deny wins for user", yaml: file, req: ex(SourceUser, "rm x"), want: Deny},
		{name: "file deny wins over yes", yaml: file, yes: true, req: ex(SourceAgent, "rm x"), want: Deny},
		{name: "file deny download", yaml: file, req: pa(SourceUser, KindDownload, "/workspace/out"), want: Deny},
		{name: "file ask before allow", yaml: file, req: pa(SourceAgent, KindWrite, "/workspace/.git/config"), want: Ask, wantOrigin: "policy.yaml:6: ask"},
		{name: "file allow write", yaml: file, req: pa(SourceAgent, KindWrite, "/workspace/a.go"), want: Allow},
		{name: "file allow write covers edit", yaml: file, req: pa(SourceAgent, KindEdit, "/workspace/a.go"), want: Allow},
		{name: "file default ask for user", yaml: file, req: ex(SourceUser, "ls"), want: Ask, wantOrigin: "policy.yaml:1: default ask"},
		{name: "file default for write outside", yaml: file, req: pa(SourceAgent, KindWrite, "/etc/x"), want: Ask},
		{name: "file default not for read", yaml: "default: deny\n", req: pa(SourceAgent, KindRead, "/x"), want: Allow},
		{name: "file default deny", yaml: "default: deny\n", req: ex(SourceUser, "ls"), want: Deny, wantOrigin: "default deny"},
		{name: "file default allow", yaml: "default: allow\n", req: ex(SourceAgent, "ls"), want: Allow},
		{name: "read deny rule", yaml: `deny: ["read:/secrets/**"]`, req: pa(SourceUser, KindRead, "/secrets/k"), want: Deny},
		{name: "complex falls to ask", yaml: file, req: ex(SourceAgent, "go test $(ls)"), want: Ask},
		{name: "mixed segments fall to ask", yaml: file, req: ex(SourceAgent, "go test ./... && make"), want: Ask},
		{name: "rename dest outside", yaml: file, req: Request{Source: SourceAgent, Kind: KindWrite, Target: "/workspace/a", Details: Details{Dest: "/etc/a"}}, want: Ask},
		// Flags.
		{name: "flag allow", allow: []string{"exec:make *"}, req: ex(SourceAgent, "make all"), want: Allow, wantOrigin: `--allow "exec:make *"`},
		{name: "flag allow two rules", allow: []string{"exec:make *", "exec:git status"}, req: ex(SourceAgent, "make && git status"), want: Allow, wantOrigin: `--allow "exec:make *", --allow "exec:git status"`},
		{name: "flag deny", deny: []string{"write:/etc/**"}, yes: true, req: pa(SourceAgent, KindWrite, "/etc/x"), want: Deny, wantOrigin: `--deny "write:/etc/**"`},
		{name: "flag deny wins over allow", allow: []string{"exec:*"}, deny: []string{"exec:curl *"}, req: ex(SourceAgent, "curl x | sh"), want: Deny},
		{name: "yes", yes: true, req: ex(SourceAgent, "anything $(x) > y"), want: Allow, wantOrigin: "--yes"},
		{name: "yes over default deny", yaml: "default: deny\n", yes: true, req: ex(SourceAgent, "ls"), want: Allow},
		{name: "ask rule beats yes", yaml: `ask: ["upload"]`, yes: true, req: pa(SourceAgent, KindUpload, "/x"), want: Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := testPolicy(t, tt.yaml, tt.allow, tt.deny, tt.yes)
			got, origin := p.Evaluate(tt.req)
			if got != tt.want || !strings.Contains(origin, tt.wantOrigin) {
				t.Fatalf("Evaluate(%+v) = %s, %q; want %s, %q", tt.req, got, origin, tt.want, tt.wantOrigin)
			}
		})
	}
}

func TestNilPolicy(t *testing.T) {
	t.Parallel()
	var p *Policy
	if got, _ := p.Evaluate(Request{Source: SourceAgent, Kind: KindExec, Target: "ls"}); got != Ask {
		t.Fatalf("nil policy agent exec = %s, want ask", got)
	}
	if got, _ := p.Evaluate(Request{Source: SourceAgent, Kind: KindRead, Target: "/x"}); got != Allow {
		t.Fatalf("nil policy read = %s, want allow", got)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string // substring of the error
	}{
		{"bad rule on line 3", "default: ask\nallow:\n  - \"nope:x\"\n", `policy.yaml:3:5: allow[0]: rule "nope:x": unknown kind`},
		{"bad rule in flow list", "deny: [\"exec:rm *\", \"exec:\"]\n", "policy.yaml:1:21: deny[1]"},
		{"unknown field", "default: ask\nalow: [\"exec\"]\n", `policy.yaml:2:1: unknown field "alow"`},
		{"bad default", "default: maybe\n", `policy.yaml:1:10: default: "maybe" is not ask, allow or deny`},
		{"duplicate field", "allow: [exec]\nallow: [upload]\n", "policy.yaml:2:1"},
		{"not a mapping", "- exec\n", "policy.yaml:1:1: want a mapping"},
		{"nested list item", "allow:\n  - [exec]\n", "policy.yaml:2:5: allow[0]: want a rule string"},
		{"map as list", "allow: {a: b}\n", "policy.yaml:1:8: allow: want a list"},
		{"syntax error", "allow: [\n  \"exec\"\n deny", "policy.yaml:2: did not find expected"},
		{"tab indent", "default: ask\nallow:\n\t- exec\n", "policy.yaml:3: found character that cannot start any token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePolicy("policy.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParsePolicy error = %v, want one containing %q", err, tt.want)
			}
			if pe := (*PolicyError)(nil); !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PolicyError", err)
			}
		})
	}
}

func TestParsePolicyForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		yaml                string
		allow, deny, ask    int
		wantDefault         Effect
		wantFirstAllowOrigi string
	}{
		{name: "empty", yaml: ""},
		{name: "comment only", yaml: "# nothing\n"},
		{name: "null lists", yaml: "allow:\ndeny:\n"},
		{name: "single strings", yaml: "allow: upload\ndeny: \"exec:rm *\"\n", allow: 1, deny: 1, wantFirstAllowOrigi: "policy.yaml:1: allow \"upload\""},
		{name: "full", yaml: "default: deny\nallow: [exec, read]\ndeny: [upload]\nask: [\"write:/x/**\"]\n", allow: 2, deny: 1, ask: 1, wantDefault: Deny},
		{name: "anchors", yaml: "allow: &a [exec]\ndeny: *a\n", allow: 1, deny: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePolicy("policy.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Allow) != tt.allow || len(p.Deny) != tt.deny || len(p.Ask) != tt.ask || p.Default != tt.wantDefault {
				t.Fatalf("got %+v", p)
			}
			if tt.wantFirstAllowOrigi != "" && p.Allow[0].Origin != tt.wantFirstAllowOrigi {
				t.Fatalf("origin = %q, want %q", p.Allow[0].Origin, tt.wantFirstAllowOrigi)
			}
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(file, []byte("deny: [\"exec:rm *\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, origin := p.Evaluate(Request{Kind: KindExec, Target: "rm x"}); origin != file+`:1: deny "exec:rm *"` {
		t.Fatalf("origin = %q", origin)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file error = %v", err)
	}
}

func TestAddRuleErrors(t *testing.T) {
	t.Parallel()
	var p Policy
	if err := p.AddAllow("exec:", ""); err == nil || !strings.Contains(err.Error(), "--allow") {
		t.Fatalf("AddAllow error = %v", err)
	}
	if err := p.AddDeny("bogus", ""); err == nil || !strings.Contains(err.Error(), "--deny") {
		t.Fatalf("AddDeny error = %v", err)
	}
	if err := p.AddAllow("exec:go test *", "config.yaml: allow"); err != nil || p.Allow[0].Origin != "config.yaml: allow" {
		t.Fatalf("AddAllow with origin: %v, %+v", err, p.Allow)
	}
}

func TestHint(t *testing.T) {
	t.Parallel()
	ex := func(cmd string) Request { return Request{Source: SourceAgent, Kind: KindExec, Target: cmd} }
	tests := []struct {
		name  string
		yaml  string
		allow []string
		req   Request
		want  string
	}{
		{"subcommand", "", nil, ex("go test ./..."), `allow it with --allow "exec:go test *" or --yes`},
		{"flag first", "", nil, ex("ls -la /workspace"), `allow it with --allow "exec:ls *" or --yes`},
		{"single word", "", nil, ex("make"), `allow it with --allow "exec:make" or --yes`},
		{"two segments", "", nil, ex("go vet ./... && git status"), `allow it with --allow "exec:go vet *" --allow "exec:git status *" or --yes`},
		{"only the missing segment", "", []string{"exec:go vet *"}, ex("go vet ./... && git status"), `allow it with --allow "exec:git status *" or --yes`},
		{"complex", "", nil, ex("echo $(id)"), `the command uses command substitution, which only --allow "exec" matches; allow it with --allow "exec" or --yes`},
		{"argv", "", nil, Request{Source: SourceAgent, Kind: KindExec, Argv: []string{"npm", "run", "build"}}, `allow it with --allow "exec:npm run *" or --yes`},
		{"write", "", nil, Request{Source: SourceAgent, Kind: KindWrite, Target: "/workspace/dir/f.txt"}, `allow it with --allow "write:/workspace/dir/**" or --yes`},
		{"write at root", "", nil, Request{Source: SourceAgent, Kind: KindDelete, Target: "/f"}, `allow it with --allow "delete:/f" or --yes`},
		{"glob chars escaped", "", nil, Request{Source: SourceAgent, Kind: KindWrite, Target: "/w/[x]/f"}, `allow it with --allow 'write:/w/\[x\]/**' or --yes`},
		{"rename", "", nil, Request{Source: SourceAgent, Kind: KindWrite, Target: "/a/x", Details: Details{Dest: "/b/y"}}, `allow it with --allow "write:/a/**" --allow "write:/b/**" or --yes`},
		{"denied by rule", "deny: [\"exec:rm *\"]\n", nil, ex("rm -rf /"), `denied by policy.yaml:1: deny "exec:rm *"; a deny rule wins over --allow and --yes, so remove it to allow this`},
		{"ask rule", "ask: [upload]\n", nil, Request{Source: SourceAgent, Kind: KindUpload, Target: "/w"}, `policy.yaml:1: ask "upload" requires approval; run interactively, or remove that rule`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := testPolicy(t, tt.yaml, tt.allow, nil, false)
			if got := p.Hint(tt.req); got != tt.want {
				t.Fatalf("Hint =\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
}

func TestSuggestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		req     Request
		suggest string
	}{
		{"exec", Request{Kind: KindExec, Target: "go test ./..."}, "exec:go test *"},
		{"exec complex", Request{Kind: KindExec, Target: "go test $(x)"}, ""},
		{"argv spaces", Request{Kind: KindExec, Argv: []string{"echo", "a b"}}, "exec:echo *"},
		{"path", Request{Kind: KindWrite, Target: "/workspace/a/b.go"}, "write:/workspace/a/**"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(SuggestRules(tt.req), ", "); got != tt.suggest {
				t.Fatalf("SuggestRules = %q, want %q", got, tt.suggest)
			}
			// Every suggested rule parses and allows the request.
			for _, s := range SuggestRules(tt.req) {
				r, err := ParseRule(s)
				if err != nil {
					t.Fatalf("suggested %q: %v", s, err)
				}
				if !r.Match(tt.req) && tt.req.Details.Dest == "" {
					t.Fatalf("suggested %q does not match %v", s, tt.req)
				}
			}
		})
	}
}
