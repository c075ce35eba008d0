package cli

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// Build information, set with -ldflags "-X ...cli.version=..." by the release.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

func newProvidersCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "providers",
		Short: "List providers, whether each is configured, and what it supports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type envDoc struct {
				providers.EnvKey
				Set bool `json:"set"`
			}
			type doc struct {
				Name         string                 `json:"name"`
				Description  string                 `json:"description"`
				Configured   bool                   `json:"configured"`
				Missing      []string               `json:"missing,omitempty"`
				Env          []envDoc               `json:"env"`
				Capabilities providers.Capabilities `json:"capabilities"`
			}
			cfg := providers.Config{Getenv: app.env.Getenv, StateDir: app.dirs.State}
			var docs []doc
			var rows [][]string
			for _, reg := range app.deps.Registry.All() {
				ok, missing := reg.Configured(cfg)
				d := doc{Name: reg.Name, Description: reg.Description, Configured: ok, Missing: missing, Env: []envDoc{}, Capabilities: reg.Capabilities}
				for _, k := range reg.Env {
					d.Env = append(d.Env, envDoc{EnvKey: k, Set: cfg.Lookup(k.Name) != ""})
				}
				docs = append(docs, d)
				status := "ready"
				if !ok {
					status = "set " + strings.Join(missing, ", ")
				}
				rows = append(rows, []string{reg.Name, status, reg.Description})
			}
			if app.flags.json {
				return output.JSON(app.streams.Out, docs)
			}
			return output.Table(app.streams.Out, []string{"PROVIDER", "STATUS", "DESCRIPTION"}, rows)
		},
	}
}

func newVersionCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, c, d := version, commit, date
			if info, ok := debug.ReadBuildInfo(); ok && v == "dev" {
				if info.Main.Version != "" && info.Main.Version != "(devel)" {
					v = info.Main.Version
				}
				for _, s := range info.Settings {
					switch {
					case s.Key == "vcs.revision" && c == "":
						c = s.Value
					case s.Key == "vcs.time" && d == "":
						d = s.Value
					}
				}
			}
			if app.flags.json {
				return output.JSON(app.streams.Out, map[string]string{"version": v, "commit": c, "date": d})
			}
			fmt.Fprintf(app.streams.Out, "sandbox %s", v)
			if c != "" {
				fmt.Fprintf(app.streams.Out, " (%s", c[:min(len(c), 12)])
				if d != "" {
					fmt.Fprintf(app.streams.Out, ", %s", d)
				}
				fmt.Fprint(app.streams.Out, ")")
			}
			fmt.Fprintln(app.streams.Out)
			return nil
		},
	}
}

func newExitCodesCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "exit-codes",
		Short: "Print the table of exit codes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if app.flags.json {
				return output.JSON(app.streams.Out, exitCodeTable)
			}
			rows := [][]string{}
			for _, e := range exitCodeTable {
				rows = append(rows, []string{fmt.Sprint(e.Code), e.Text})
			}
			rows = append(rows, []string{"N", "exec: the command's own exit status"})
			return output.Table(app.streams.Out, []string{"CODE", "MEANING"}, rows)
		},
	}
}
