// Package quiet keeps the program's start from asking the terminal
// anything.
//
// Bubble Tea v1's initialiser asks Lip Gloss's default renderer whether the
// terminal's background is dark, and when standard output is a terminal
// that means writing a query (OSC 11, then a cursor position report) and
// waiting for the answer, before main runs: a round trip for every start
// of every command, type-ahead read as if it were the answer, and a
// 5-second wait on a terminal that answers nothing (script(1), an editor's
// shell, an agent's pty). This package's initialiser runs first (it needs
// only Lip Gloss, and its import path sorts before Bubble Tea's, so the
// language's initialisation order puts it ahead) and gives the renderer an
// answer, so that it never asks. The TUI's styles name fixed colours, not
// adaptive ones, so the answer changes nothing that is drawn.
package quiet

import "github.com/charmbracelet/lipgloss"

func init() { lipgloss.SetHasDarkBackground(true) }
