package tui

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles holds every lipgloss style of the TUI, built from a few semantic
// colours. With colour off every style renders plain text.
type Styles struct {
	Status     lipgloss.Style // the status line
	StatusKey  lipgloss.Style // labels in the status line
	StatusWarn lipgloss.Style // a TTL running out, a failed state
	Mode       map[string]lipgloss.Style

	Stdout lipgloss.Style
	Stderr lipgloss.Style
	Info   lipgloss.Style // progress and notes
	Op     lipgloss.Style // the echo of what the user ran
	Setup  lipgloss.Style
	Error  lipgloss.Style
	OK     lipgloss.Style

	Prompt lipgloss.Style

	DialogBorder lipgloss.Style
	DialogTitle  lipgloss.Style
	Choice       lipgloss.Style
	ChoiceOn     lipgloss.Style // the choice under the cursor
	ChoiceOff    lipgloss.Style // a choice that cannot apply
	Rule         lipgloss.Style // a rule the dialog would add
	DiffAdd      lipgloss.Style
	DiffDel      lipgloss.Style
	DiffHunk     lipgloss.Style
	Warn         lipgloss.Style

	Help    lipgloss.Style
	HelpKey lipgloss.Style

	Bar      lipgloss.Color // progress bar fill
	BarEmpty lipgloss.Color
	Color    bool
}

// NewStyles builds the styles for output w. Colour is off when color is
// false (NO_COLOR, or a terminal without colour).
func NewStyles(w io.Writer, color bool) Styles {
	r := lipgloss.NewRenderer(w)
	if !color {
		r.SetColorProfile(termenv.Ascii)
	}
	return stylesFor(r, color)
}

// stylesFor builds the styles on renderer r.
func stylesFor(r *lipgloss.Renderer, color bool) Styles {
	n := r.NewStyle()
	var (
		accent = lipgloss.Color("12")
		muted  = lipgloss.Color("8")
		good   = lipgloss.Color("10")
		bad    = lipgloss.Color("9")
		warn   = lipgloss.Color("11")
		fg     = lipgloss.Color("15")
		bg     = lipgloss.Color("236")
	)
	return Styles{
		Status:     n.Foreground(fg).Background(bg),
		StatusKey:  n.Foreground(muted).Background(bg),
		StatusWarn: n.Foreground(warn).Background(bg).Bold(true),
		Mode: map[string]lipgloss.Style{
			"ask":     n.Foreground(good).Background(bg).Bold(true),
			"session": n.Foreground(accent).Background(bg).Bold(true),
			"all":     n.Foreground(bad).Background(bg).Bold(true),
		},
		Stdout:       n,
		Stderr:       n.Foreground(warn),
		Info:         n.Foreground(muted),
		Op:           n.Foreground(accent).Bold(true),
		Setup:        n.Foreground(muted),
		Error:        n.Foreground(bad),
		OK:           n.Foreground(good),
		Prompt:       n.Foreground(accent).Bold(true),
		DialogBorder: n.Foreground(warn),
		DialogTitle:  n.Foreground(warn).Bold(true),
		Choice:       n,
		ChoiceOn:     n.Foreground(accent).Bold(true),
		ChoiceOff:    n.Foreground(muted),
		Rule:         n.Foreground(accent),
		DiffAdd:      n.Foreground(good),
		DiffDel:      n.Foreground(bad),
		DiffHunk:     n.Foreground(accent),
		Warn:         n.Foreground(warn).Bold(true),
		Help:         n.Foreground(muted),
		HelpKey:      n.Bold(true), // the terminal's own foreground: it reads on any background
		Bar:          accent,
		BarEmpty:     muted,
		Color:        color,
	}
}
