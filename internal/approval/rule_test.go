package approval

import (
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    string // canonical form
		wantErr string // substring of the error
	}{
		{in: "exec:go test *", want: "exec:go test *"},
		{in: "exec:git status", want: "exec:git status"},
		{in: "  exec:  git   status  ", want: "exec:git status"},
		{in: "exec:*", want: "exec:*"},
		{in: "exec", want: "exec"},
		{in: "write:/workspace/**", want: "write:/workspace/**"},
		{in: "write:/workspace/", want: "write:/workspace/**"},
		{in: "write:src/**", want: "write:/workspace/src/**"},
		{in: "write:**/*.go", want: "write:**/*.go"},
		{in: "write:/a//b/./c", want: "write:/a/b/c"},
		{in: "download:*", want: "download:*"},
		{in: "download:**", want: "download:*"},
		{in: "upload", want: "upload"},
		{in: "edit:/workspace/*.md", want: "edit:/workspace/*.md"},
		{in: "*", want: "*"},
		{in: "*:*", want: "*:*"},
		{in: "", wantErr: "empty rule"},
		{in: "   ", wantErr: "empty rule"},
		{in: "run:ls", wantErr: `unknown kind "run"`},
		{in: "Exec:ls", wantErr: "unknown kind"},
		{in: "exec:", wantErr: "empty pattern"},
		{in: "write: ", wantErr: "empty pattern"},
		{in: "exec:git * status", wantErr: "may only end"},
		{in: "write:/workspace/../etc/**", wantErr: `".."`},
		{in: "write:/workspace/[", wantErr: "bad glob"},
		{in: "*:/workspace/**", wantErr: "kind * takes no pattern"},
		{in: "read:/a\x00b", wantErr: "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRule(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if got := r.String(); got != tt.want {
				t.Fatalf("ParseRule(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
			again, err := ParseRule(r.String())
			if err != nil || again.String() != r.String() {
				t.Fatalf("reparse of %q = %v, %v", r.String(), again, err)
			}
		})
	}
}

func TestRuleMatch(t *testing.T) {
	t.Parallel()
	execReq := func(cmd string) Request { return Request{Kind: KindExec, Target: cmd} }
	argvReq := func(argv ...string) Request {
		return Request{Kind: KindExec, Target: QuoteArgv(argv), Argv: argv}
	}
	pathReq := func(k Kind, p string) Request { return Request{Kind: k, Target: p} }
	tests := []struct {
		name string
		rule string
		req  Request
		want bool
	}{
		{"prefix with args", "exec:go test *", execReq("go test ./..."), true},
		{"prefix without args", "exec:go test *", execReq("go test"), true},
		{"prefix other command", "exec:go test *", execReq("go build ./..."), false},
		{"prefix is words not chars", "exec:go test *", execReq("go testify"), false},
		{"exact", "exec:git status", execReq("git status"), true},
		{"exact whitespace", "exec:git status", execReq("  git    status "), true},
		{"exact extra arg", "exec:git status", execReq("git status --short"), false},
		{"quotes removed", "exec:git status", execReq(`'git' "status"`), true},
		{"every segment must match", "exec:go test *", execReq("go test ./... && rm -rf /"), false},
		{"all segments match", "exec:go *", execReq("go vet ./... && go test ./..."), true},
		{"complex never matches prefix", "exec:echo *", execReq("echo $(id)"), false},
		{"complex redirect", "exec:echo *", execReq("echo hi > /etc/passwd"), false},
		{"star matches complex", "exec:*", execReq("echo $(id) > x"), true},
		{"bare matches complex", "exec", execReq("for i in 1; do x; done"), true},
		{"any kind", "*", execReq("rm -rf /"), true},
		{"argv one segment", "exec:sh -c *", argvReq("sh", "-c", "rm -rf / && x"), true},
		{"argv exact", "exec:ls -la", argvReq("ls", "-la"), true},
		{"argv word with spaces", "exec:echo *", argvReq("echo", "a b; rm"), true},
		{"kind mismatch", "write:/workspace/**", execReq("ls"), false},
		{"path glob", "write:/workspace/**", pathReq(KindWrite, "/workspace/a/b.txt"), true},
		{"path glob dir itself", "write:/workspace/**", pathReq(KindWrite, "/workspace"), true},
		{"path outside", "write:/workspace/**", pathReq(KindWrite, "/etc/passwd"), false},
		{"prefix trick", "write:/workspace/**", pathReq(KindWrite, "/workspace2/x"), false},
		{"single star", "write:/workspace/*", pathReq(KindWrite, "/workspace/a/b"), false},
		{"write covers edit", "write:/workspace/**", pathReq(KindEdit, "/workspace/x"), true},
		{"edit does not cover write", "edit:/workspace/**", pathReq(KindWrite, "/workspace/x"), false},
		{"bare path kind", "upload", pathReq(KindUpload, "/anything"), true},
		{"star path", "download:*", pathReq(KindDownload, "/a/b/c"), true},
		{"rename both paths", "write:/workspace/**", Request{Kind: KindWrite, Target: "/workspace/a", Details: Details{Dest: "/etc/a"}}, false},
		{"rename inside", "write:/workspace/**", Request{Kind: KindWrite, Target: "/workspace/a", Details: Details{Dest: "/workspace/b"}}, true},
		{"zero rule", "", pathReq(KindRead, "/x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r Rule
			if tt.rule != "" {
				var err error
				if r, err = ParseRule(tt.rule); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.Match(tt.req); got != tt.want {
				t.Fatalf("%q.Match(%s) = %v, want %v", tt.rule, tt.req, got, tt.want)
			}
		})
	}
}
