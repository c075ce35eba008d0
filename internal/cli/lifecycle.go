package cli

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

func newCreateCmd(app *App) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox (and run --sandbox-setup) and keep it",
		Long: `Create a sandbox (and run --sandbox-setup in it), keep it, and print its id.

On providers whose sandboxes are machines (local), the sandbox is running: what
one command starts keeps running for the next. It stops by itself after
--auto-stop DUR without an operation (default 15m; --auto-stop 0 never stops
it); a stopped sandbox keeps its files (not /tmp, nor its processes) and the
next operation starts it again. See also stop, start, ps, kill and logs.`,
		Args: cobra.NoArgs,
		Example: `  sandbox create --ttl 2h
  sandbox create --auto-stop 1h          # stop after an hour without operations
  sandbox create --auto-stop 0           # never stop by itself
  sandbox create --sandbox-setup ./setup.sh --label project=demo --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if app.flags.sandboxID != "" {
				return &UsageError{Err: errors.New("create makes a new sandbox; drop --sandbox-id")}
			}
			extra, err := parseLabels(labels)
			if err != nil {
				return err
			}
			o, err := app.openOptions()
			if err != nil {
				return err
			}
			o.Keep = true
			o.Spec.Labels = extra
			s, err := app.open(cmd.Context(), o)
			if err != nil {
				return err
			}
			if err := s.Close(cmd.Context()); err != nil {
				return err
			}
			info := s.Info()
			if app.flags.json {
				return output.JSON(app.streams.Out, sandboxObject(info))
			}
			fmt.Fprintln(app.streams.Out, output.Escape(info.ID))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label `k=v` stored with the sandbox (repeatable)")
	return cmd
}

func newListCmd(app *App) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls-sandboxes"},
		Short:   "List sandboxes of the provider (filter with --label)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := parseLabels(labels)
			if err != nil {
				return err
			}
			infos, err := app.engine.List(cmd.Context(), app.flags.provider, providers.Filter{Labels: filter})
			if err != nil {
				return err
			}
			sort.Slice(infos, func(i, j int) bool { return infos[i].CreatedAt.Before(infos[j].CreatedAt) })
			if app.flags.json {
				list := make([]*events.Sandbox, 0, len(infos))
				for _, in := range infos {
					list = append(list, sandboxObject(in))
				}
				return output.JSON(app.streams.Out, list)
			}
			rows := make([][]string, 0, len(infos))
			for _, in := range infos {
				rows = append(rows, []string{in.ID, in.Provider, string(in.State), age(in.CreatedAt), expires(in.ExpiresAt), formatLabels(in.Labels)})
			}
			return output.Table(app.streams.Out, []string{"ID", "PROVIDER", "STATE", "CREATED", "EXPIRES", "LABELS"}, rows)
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "only sandboxes with label `k=v` (repeatable)")
	return cmd
}

func newInfoCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "info [ID]",
		Short: "Describe a sandbox",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := app.flags.sandboxID
			if len(args) == 1 {
				id = args[0]
			}
			if id == "" {
				return &UsageError{Err: errors.New("info needs a sandbox id (argument or --sandbox-id)")}
			}
			info, err := app.engine.Get(cmd.Context(), app.flags.provider, id)
			if err != nil {
				return err
			}
			if app.flags.json {
				// As the table: the isolation is named even when it is
				// the provider's normal one.
				sb := sandboxObject(info)
				sb.Isolation = cmp.Or(sb.Isolation, "full")
				return output.JSON(app.streams.Out, sb)
			}
			rows := [][]string{
				{"id", info.ID}, {"provider", info.Provider}, {"state", string(info.State)},
				{"created", info.CreatedAt.Format(time.RFC3339)}, {"expires", expires(info.ExpiresAt)},
				{"network", string(info.Network)}, {"labels", formatLabels(info.Labels)},
				{"isolation", isolationName(info.Isolation)},
				{"limits", formatLimits(info.Resources)}, {"auto-stop", formatAutoStop(info)},
				{"user", cmp.Or(info.User, "(the provider's default)")},
				{"reattach", engine.ReattachCommand(info.Provider, info.ID)},
			}
			return output.Table(app.streams.Out, []string{"FIELD", "VALUE"}, rows)
		},
	}
}

// sandboxObject is info as `--json` verbs print a sandbox: the object
// sandbox.* events carry (DESIGN §4), without the tool's own labels.
func sandboxObject(info providers.Info) *events.Sandbox {
	return events.NewSandbox(info, "", engine.RunLabel)
}

// formatLimits shows a sandbox's limits in the info table.
func formatLimits(r providers.Resources) string {
	var parts []string
	if r.CPUs > 0 {
		parts = append(parts, strconv.FormatFloat(r.CPUs, 'f', -1, 64)+" CPUs")
	}
	if r.MemoryMB > 0 {
		parts = append(parts, "memory "+strconv.Itoa(r.MemoryMB)+" MiB")
	}
	if r.DiskMB > 0 {
		parts = append(parts, "disk "+strconv.Itoa(r.DiskMB)+" MiB")
	}
	if r.Pids > 0 {
		parts = append(parts, strconv.Itoa(r.Pids)+" processes")
	}
	if len(parts) == 0 {
		return "(the provider's defaults)"
	}
	return strings.Join(parts, ", ")
}

// formatAutoStop shows when a sandbox stops by itself.
func formatAutoStop(info providers.Info) string {
	if info.AutoStop <= 0 {
		return "never (or as the provider decides)"
	}
	return "after " + info.AutoStop.String() + " without an operation"
}

// isolationName shows the isolation of a sandbox in the info table.
func isolationName(s string) string {
	if s == "" {
		return "full"
	}
	return strings.ToUpper(s) + " (weaker than the provider's normal isolation)"
}

func newDeleteCmd(app *App) *cobra.Command {
	var expired, all bool
	var labels []string
	cmd := &cobra.Command{
		Use:     "delete [ID...]",
		Aliases: []string{"rm"},
		Short:   "Delete sandboxes by id, by label, all this tool created, or those whose --ttl has passed",
		Example: `  sandbox delete sb-1a2b3c
  sandbox delete --label conv=42
  sandbox delete --expired`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if id := app.flags.sandboxID; id != "" && !slices.Contains(args, id) {
				args = append(args, id)
			}
			if len(args) == 0 && !expired && !all && len(labels) == 0 {
				return &UsageError{Err: errors.New("delete needs sandbox ids, --label k=v, --all or --expired")}
			}
			deleted := []string{}
			var errs []error
			if len(labels) > 0 {
				filter, err := parseLabels(labels)
				if err != nil {
					return err
				}
				infos, err := app.engine.List(ctx, app.flags.provider, providers.Filter{Labels: filter})
				if err != nil {
					return err
				}
				for _, in := range infos {
					args = append(args, in.ID)
				}
			}
			if all {
				recs, err := app.engine.Store().All()
				if err != nil {
					return err
				}
				for _, r := range recs {
					var gone *engine.NotFoundError
					if err := app.engine.Delete(ctx, r.Provider, r.ID); errors.As(err, &gone) {
						continue // already gone: forgotten by Delete
					} else if err != nil {
						errs = append(errs, err)
						continue
					}
					deleted = append(deleted, r.ID)
				}
			}
			if all {
				// What interrupted creates and deletes left behind.
				ids, err := app.engine.Collect(ctx, app.flags.provider, engine.DefaultCollectGrace)
				deleted = append(deleted, ids...)
				if err != nil && !errors.Is(err, providers.ErrUnsupported) {
					errs = append(errs, err)
				}
			}
			if expired {
				ids, err := app.engine.DeleteExpired(ctx)
				deleted = append(deleted, ids...)
				if err != nil {
					errs = append(errs, err)
				}
			}
			for _, id := range args {
				if err := app.engine.Delete(ctx, app.flags.provider, id); err != nil {
					errs = append(errs, err)
					continue
				}
				deleted = append(deleted, id)
			}
			if app.flags.json {
				if err := output.JSON(app.streams.Out, map[string]any{"deleted": deleted}); err != nil {
					return err
				}
			} else {
				for _, id := range deleted {
					fmt.Fprintln(app.streams.Out, output.Escape(id))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&expired, "expired", false, "delete every sandbox this tool created whose --ttl has passed")
	cmd.Flags().BoolVar(&all, "all", false, "delete every sandbox this tool created and still remembers")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "delete the provider's sandboxes carrying label `k=v` (repeatable)")
	return cmd
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func expires(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Until(t).Round(time.Second)
	if d <= 0 {
		return "expired"
	}
	return "in " + d.String()
}

func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func newGcCmd(app *App) *cobra.Command {
	grace := engine.DefaultCollectGrace
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove what interrupted creates and deletes left on this host",
		Long: `Remove what a create or delete that was killed half-way (kill -9, a full disk)
left behind: a sandbox directory without its metadata, with any process still
running in it, and empty cgroups. Only leftovers older than --grace go, so a
create at work in another terminal is left alone. Prints the ids removed.
` + "`delete --all`" + ` does the same after deleting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := app.engine.Collect(cmd.Context(), app.flags.provider, grace)
			if app.flags.json {
				if ids == nil {
					ids = []string{}
				}
				if jerr := output.JSON(app.streams.Out, map[string]any{"collected": ids}); jerr != nil {
					return jerr
				}
			} else {
				for _, id := range ids {
					fmt.Fprintln(app.streams.Out, output.Escape(id))
				}
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", grace, "remove only leftovers older than `DUR`")
	return cmd
}
