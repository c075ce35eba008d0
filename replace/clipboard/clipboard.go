// Package clipboard stands in for github.com/atotto/clipboard, which the
// bubbles text inputs call to paste (ctrl+v): the project's go.mod replaces
// that module with this directory. The API is the part of it that is used,
// ReadAll and WriteAll; the difference is when the clipboard tool is found.
// The original looked for its tools on PATH in an init function, which
// every start of the program paid (the CLI's and each sandbox init's and
// runner's, as they are this binary too): some sixty stat calls on a
// typical PATH, a thirtieth of a cold `sandbox exec`. Here the tool is
// looked up when the clipboard is used.
package clipboard

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// tool is a program that reads and writes a clipboard.
type tool struct {
	paste, copy []string
	// when, if set, says whether the tool applies here.
	when func() bool
}

// tools are the clipboard programs in the order they are tried: the one
// of a Wayland session first, then X11's, then Termux's and Windows'
// (under WSL). Both programs of a tool must be found.
var tools = []tool{
	{paste: []string{"pbpaste"}, copy: []string{"pbcopy"}, when: func() bool { return runtime.GOOS == "darwin" }},
	{paste: []string{"wl-paste", "--no-newline"}, copy: []string{"wl-copy"}, when: func() bool { return os.Getenv("WAYLAND_DISPLAY") != "" }},
	{paste: []string{"xclip", "-out", "-selection", "clipboard"}, copy: []string{"xclip", "-in", "-selection", "clipboard"}},
	{paste: []string{"xsel", "--output", "--clipboard"}, copy: []string{"xsel", "--input", "--clipboard"}},
	{paste: []string{"termux-clipboard-get"}, copy: []string{"termux-clipboard-set"}},
	{paste: []string{"powershell.exe", "-NoProfile", "-Command", "Get-Clipboard"}, copy: []string{"clip.exe"}},
}

// errNoTool says what to install.
var errNoTool = errors.New("no clipboard program found: install wl-clipboard, xclip or xsel")

// find returns the first tool that applies here and whose programs are on
// PATH.
func find() (tool, error) {
	for _, t := range tools {
		if t.when != nil && !t.when() {
			continue
		}
		if _, err := exec.LookPath(t.paste[0]); err != nil {
			continue
		}
		if _, err := exec.LookPath(t.copy[0]); err != nil {
			continue
		}
		return t, nil
	}
	return tool{}, errNoTool
}

// ReadAll returns the clipboard's text.
func ReadAll() (string, error) {
	t, err := find()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(t.paste[0], t.paste[1:]...).Output()
	if err != nil {
		return "", err
	}
	if t.paste[0] == "powershell.exe" {
		// Windows ends lines with CR LF, and Get-Clipboard the text
		// with one more.
		out = bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n"))
		out = bytes.TrimSuffix(out, []byte("\n"))
	}
	return string(out), nil
}

// WriteAll puts text on the clipboard.
func WriteAll(text string) error {
	t, err := find()
	if err != nil {
		return err
	}
	cmd := exec.Command(t.copy[0], t.copy[1:]...)
	cmd.Stdin = strings.NewReader(text)
	return cmd.Run()
}
