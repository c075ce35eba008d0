// Package cli is the command-line surface of sandbox: the cobra tree, the
// global flags, the exit-code table and error printing with hints. Commands
// reach providers only through the engine, and sandbox contents only through
// a session's approval gate.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/agentbox/sandbox/internal/interactive"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// Streams are the program's standard streams and whether they are terminals.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// InTTY, OutTTY and ErrTTY report terminals.
	InTTY, OutTTY, ErrTTY bool
}

// SystemStreams returns the process's own streams.
func SystemStreams() Streams {
	isTTY := func(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
	return Streams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		InTTY: isTTY(os.Stdin), OutTTY: isTTY(os.Stdout), ErrTTY: isTTY(os.Stderr),
	}
}

// Deps are what Main needs from the program.
type Deps struct {
	Streams  Streams
	Registry *providers.Registry
	// Getenv reads the real environment (os.LookupEnv).
	Getenv func(string) (string, bool)
	// Getwd returns the working directory (where .env is looked for).
	Getwd func() (string, error)
	// Handoff replaces the process with another program of the release
	// given these same arguments, for a provider built into that one only
	// (ExecProgram); it returns only when it could not. Nil: it cannot.
	Handoff func(program string, args []string) error
	// ArmInterrupts makes SIGINT and SIGTERM cancel the root context:
	// at once when after is 0, else once after has passed (if the
	// process still runs then); until armed, either signal ends the
	// process as the system's default does. Every verb arms it at once
	// but exec, which may arm it late (see execInterrupts). Nil: there is
	// nothing to arm (the caller cancels the context itself).
	ArmInterrupts func(after time.Duration)
	// Serve serves emulators (`sandbox serve`). Nil: the program has no
	// emulator built in (sandbox; see providers.CloudProgram).
	Serve ServeFunc
	// TUI is the interactive mode of bare `sandbox` on a terminal
	// (tui.Mode). Nil: the program has none built in (sandbox): such a
	// run is handed to providers.CloudProgram (see package interactive).
	TUI interactive.Mode
}

// ServeFunc serves the emulator em on ln until ctx ends, with at most
// maxConns connections at once, each closed after idleTimeout without a
// request (httpguard.ServeEmulator).
type ServeFunc func(ctx context.Context, em providers.Emulator, ln net.Listener, maxConns int, idleTimeout time.Duration) error

// Main runs the program with args (without the program name) and returns the
// exit status. ctx is the root context, cancelled on SIGINT/SIGTERM.
func Main(ctx context.Context, args []string, d Deps) int {
	app := &App{deps: d, streams: d.Streams, args: args}
	root := newRootCmd(app)
	root.SetArgs(args)
	root.SetIn(d.Streams.In)
	root.SetOut(d.Streams.Out)
	root.SetErr(d.Streams.Err)
	err := root.ExecuteContext(ctx)
	if app.engine != nil {
		app.engine.Close()
	}
	code := ExitOK
	if err != nil {
		err = explainUnreachable(err, d.Registry)
		code = exitCode(err)
		if ctx.Err() != nil && code == ExitError {
			code = ExitInterrupted
		}
	}
	if app.stream != nil {
		app.stream.end(code, err, app.masker.String)
	}
	if app.audit != nil {
		if aerr := app.audit.Err(); aerr != nil {
			fmt.Fprintf(d.Streams.Err, "sandbox: warning: the audit log %s is incomplete: %s\n", output.Escape(app.audit.Path()), output.Escape(aerr.Error()))
		}
		app.audit.Close()
	}
	if err == nil {
		return ExitOK
	}
	var status *ExitStatus
	if !errors.As(err, &status) {
		app.printError(err)
	}
	return code
}

// explainUnreachable makes a provider's API that could not be reached
// name the variables that set its address (those of its registration
// ending in _URL or _DOMAIN), for every provider at once. It returns err
// with its message so completed, or err itself.
func explainUnreachable(err error, reg *providers.Registry) error {
	var ue *providers.UnreachableError
	if !errors.As(err, &ue) || len(ue.Check) > 0 || reg == nil {
		return err
	}
	r, lerr := reg.Lookup(ue.Provider)
	if lerr != nil {
		return err
	}
	named := *ue
	for _, k := range r.Env {
		if strings.HasSuffix(k.Name, "_URL") || strings.HasSuffix(k.Name, "_DOMAIN") {
			named.Check = append(named.Check, k.Name)
		}
	}
	if len(named.Check) == 0 {
		return err
	}
	return &explainedError{msg: strings.Replace(err.Error(), ue.Error(), named.Error(), 1), err: err}
}

// explainedError is an error with a message completed by the CLI.
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

// printError writes "sandbox: message" to stderr, masked and escaped
// (output.EscapeText): a message may quote a command, a path or the tail
// of a setup script's output, none of which may drive the terminal.
func (a *App) printError(err error) {
	msg := err.Error()
	if a.masker != nil {
		msg = a.masker.String(msg)
	}
	msg = output.EscapeText(msg)
	var usage *UsageError
	if errors.As(err, &usage) && !strings.Contains(msg, "--help") {
		msg += "\n(run `sandbox --help` for usage)"
	}
	fmt.Fprintf(a.streams.Err, "sandbox: %s\n", msg)
}

// globalFlags are valid before or after any verb.
type globalFlags struct {
	provider     string
	sandboxID    string
	labels       []string
	setup        string
	setupTimeout time.Duration
	env          []string
	envFiles     []string
	ttl          time.Duration
	keep         bool
	network      string
	yes          bool
	allow        []string
	deny         []string
	policy       string
	json         bool
	timeout      time.Duration
	cpus         float64
	memory       string
	disk         string
	pids         int
	// image is --image (providers.Spec.Image).
	image string
	// auditRequired refuses a gated operation whose audit record cannot
	// be written (approval.GateOptions.AuditRequired).
	auditRequired bool
	// user is --user (providers.Spec.User and ExecRequest.User).
	user string
	// autoStop is --auto-stop (providers.Spec.AutoStop).
	autoStop autoStopFlag
}

// annotate sets the annotation key of cmd to value and returns cmd.
func annotate(cmd *cobra.Command, key, value string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[key] = value
	return cmd
}

// jsonDocument marks a command whose --json output is one JSON document (an
// object or an array) rather than a stream of JSON Lines events: lifecycle and
// gate events are not written to its stdout, so `| jq` sees one value. The
// audit log still records every decision.
const jsonDocument = "json-document"

// documentOutput marks cmd as printing one JSON document and returns it.
func documentOutput(cmd *cobra.Command) *cobra.Command {
	return annotate(cmd, jsonDocument, "true")
}

// jsonEvents marks a command whose --json output is the event stream of
// package events (exec, run, read…); the others print one document, or
// nothing, on stdout.
const jsonEvents = "json-events"

// eventOutput marks cmd as printing the event stream and returns it.
func eventOutput(cmd *cobra.Command) *cobra.Command {
	return annotate(cmd, jsonEvents, "true")
}

// printsEvents reports whether cmd prints the event stream with --json.
func printsEvents(cmd *cobra.Command) bool {
	return cmd.Annotations[jsonEvents] == "true" && !printsDocument(cmd)
}

// jsonDocumentWhen names a boolean flag of a command whose --json output
// is one JSON document when that flag is set (exec --background).
const jsonDocumentWhen = "json-document-when"

// documentOutputWhen marks cmd as printing one JSON document when its
// boolean flag is set, and returns it.
func documentOutputWhen(cmd *cobra.Command, flag string) *cobra.Command {
	return annotate(cmd, jsonDocumentWhen, flag)
}

// printsDocument reports whether cmd was marked by documentOutput, or by
// documentOutputWhen with its flag set.
func printsDocument(cmd *cobra.Command) bool {
	if cmd.Annotations[jsonDocument] == "true" {
		return true
	}
	if flag := cmd.Annotations[jsonDocumentWhen]; flag != "" {
		on, err := cmd.Flags().GetBool(flag)
		return err == nil && on
	}
	return false
}

// allCPUs marks a command that serves or copies in parallel (the TUI, serve,
// run, upload, download): it runs with the runtime's default GOMAXPROCS,
// the others on the one processor the program starts with (package procs).
const allCPUs = "all-cpus"

// parallel marks cmd as allCPUs and returns it.
func parallel(cmd *cobra.Command) *cobra.Command {
	return annotate(cmd, allCPUs, "true")
}

// lateInterrupts marks a command that arms SIGINT and SIGTERM itself
// (App.armInterrupts) instead of before it runs.
const lateInterrupts = "late-interrupts"

// armsInterrupts marks cmd as arming SIGINT and SIGTERM itself, and
// returns it.
func armsInterrupts(cmd *cobra.Command) *cobra.Command {
	return annotate(cmd, lateInterrupts, "true")
}

// needsEngine makes cmd build the engine (App.Engine) before it runs, for
// a verb that uses it throughout.
func (a *App) needsEngine(cmd *cobra.Command) *cobra.Command {
	cmd.PreRunE = func(*cobra.Command, []string) error {
		_, err := a.Engine()
		return err
	}
	return cmd
}

func newRootCmd(app *App) *cobra.Command {
	g := &app.flags
	root := &cobra.Command{
		Use:   "sandbox",
		Short: "Run untrusted code in a sandbox, with every operation approved",
		Long: `sandbox creates or reuses a sandbox from a provider (local Linux namespaces by
default, or e2b, daytona, runloop, modal), runs setup scripts in it, and drives
exec / read / write / edit / ls / glob / grep / upload / download through one
approval gate.

A verb without --sandbox-id or --sandbox-label works on a fresh sandbox that is
deleted afterwards (unless --keep).`,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
		SilenceUsage:               true,
		Args:                       unknownVerb,
		PersistentPreRunE:          func(cmd *cobra.Command, _ []string) error { return app.init(cmd) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !app.tuiTerminal() || app.bridge == nil {
				cmd.SetOut(app.streams.Err)
				cmd.Usage()
				return &UsageError{Err: errors.New("no verb given and no terminal for the interactive mode")}
			}
			return app.runTUI(cmd)
		},
	}
	parallel(root) // the TUI
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	f := root.PersistentFlags()
	f.StringVarP(&g.provider, "sandbox", "s", "", "provider: local, e2b, daytona, runloop, modal (default from config, then $SANDBOX_PROVIDER, then local)")
	f.StringVar(&g.sandboxID, "sandbox-id", "", "reuse this sandbox (never deleted on exit)")
	f.StringArrayVar(&g.labels, "sandbox-label", nil, "find-or-create the sandbox carrying label `k=v` (repeatable)")
	f.StringVar(&g.setup, "sandbox-setup", "", "setup script `FILE` run after create (skipped on reuse when unchanged)")
	f.DurationVar(&g.setupTimeout, "setup-timeout", 0, "timeout of the setup script (default 15m)")
	f.StringArrayVarP(&g.env, "env", "e", nil, "sandbox environment: `KEY=VAL`, or KEY to copy the host value (repeatable)")
	f.StringArrayVar(&g.envFiles, "env-file", nil, "read sandbox environment from `FILE` (repeatable)")
	f.DurationVar(&g.ttl, "ttl", 0, "lifetime of a created sandbox (`DUR`, e.g. 2h; an expired sandbox is deleted by the next run, or by sandbox delete --expired)")
	f.BoolVar(&g.keep, "keep", false, "keep a created sandbox on exit and print the reattach command")
	f.StringVar(&g.user, "user", "", "run commands as `USER` of the sandbox (a name in its /etc/passwd or a uid); a created sandbox makes it its default user, adding it when missing")
	f.StringVar(&g.network, "network", "", "network for executed commands: on or off (local default: off)")
	f.BoolVarP(&g.yes, "yes", "y", false, "approve every operation no deny rule matches")
	f.StringArrayVar(&g.allow, "allow", nil, "allow `RULE` (KIND[:PATTERN], e.g. \"exec:go test *\"; repeatable)")
	f.StringArrayVar(&g.deny, "deny", nil, "deny `RULE` (repeatable; deny wins)")
	f.StringVar(&g.policy, "policy", "", "approval policy `FILE` (YAML)")
	f.BoolVar(&g.json, "json", false, "machine output: JSON for lookups, JSON Lines events for runs")
	f.DurationVar(&g.timeout, "timeout", 0, "per-call timeout (e.g. 30s, 5m)")
	f.Float64Var(&g.cpus, "cpus", 0, "CPU limit of a created sandbox, in CPUs (e.g. 1.5), where the provider and host support it")
	f.StringVar(&g.memory, "memory", "", "memory limit of a created sandbox (`SIZE`: 512m, 2g, or MiB), where the provider and host support it")
	f.StringVar(&g.disk, "disk", "", "disk quota of a created sandbox's files (`SIZE`: 512m, 20g, or MiB), where the provider supports it (local: 10g by default)")
	f.StringVar(&g.image, "image", "", "what a created sandbox starts from (`NAME`): an e2b template, a daytona snapshot, a runloop blueprint or snapshot, a modal image; local has none")
	f.IntVar(&g.pids, "pids", 0, "process limit of a created sandbox, where the provider and host support it")
	f.Var(&g.autoStop, "auto-stop", "stop a created sandbox after `DUR` without an operation (its files stay; the next operation starts it); 0 never")
	f.BoolVar(&g.auditRequired, "audit-required", false, "refuse (exit 1) every operation whose audit record cannot be written, instead of running it unaudited")

	root.AddGroup(&cobra.Group{ID: "life", Title: "Lifecycle:"}, &cobra.Group{ID: "ops", Title: "Operations:"}, &cobra.Group{ID: "more", Title: "More:"})
	vs := verbs(app)
	// A call naming one of the verbs gets that verb alone: building the
	// whole tree (and cobra's completion command) was a twentieth of a
	// cold `sandbox exec`. Help, completion, an unknown verb or flag get
	// all of them.
	if v, ok := verbOf(vs, root.PersistentFlags(), app.args); ok {
		vs = []verb{v}
		root.CompletionOptions.DisableDefaultCmd = true
	}
	for _, v := range vs {
		c := v.build()
		c.GroupID = v.group
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("more")
	root.SetCompletionCommandGroupID("more")
	return root
}

// unknownVerb refuses the root's arguments (it has verbs, not arguments)
// as a usage error that suggests the verbs it may have meant.
func unknownVerb(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &UsageError{Err: errors.New(msg)}
}

// verb is one subcommand of the root: its name and aliases, its group in
// the help, and how it is built.
type verb struct {
	names []string
	group string
	build func() *cobra.Command
}

// verbs are the root's subcommands, in the order of the help.
func verbs(app *App) []verb {
	v := func(group string, build func() *cobra.Command, names ...string) verb {
		return verb{names: names, group: group, build: build}
	}
	return []verb{
		v("life", func() *cobra.Command { return documentOutput(newCreateCmd(app)) }, "create"),
		v("life", func() *cobra.Command { return app.needsEngine(newListCmd(app)) }, "list", "ls-sandboxes"),
		v("life", func() *cobra.Command { return app.needsEngine(newInfoCmd(app)) }, "info"),
		v("life", func() *cobra.Command { return app.needsEngine(newDeleteCmd(app)) }, "delete", "rm"),
		v("life", func() *cobra.Command { return app.needsEngine(documentOutput(newGcCmd(app))) }, "gc"),
		v("life", func() *cobra.Command { return documentOutput(newStopCmd(app)) }, "stop"),
		v("life", func() *cobra.Command { return documentOutput(newStartCmd(app)) }, "start"),
		v("life", func() *cobra.Command { return documentOutput(newPsCmd(app)) }, "ps"),
		v("life", func() *cobra.Command { return eventOutput(newKillCmd(app)) }, "kill"),
		v("life", func() *cobra.Command { return documentOutput(newLogsCmd(app)) }, "logs"),
		v("ops", func() *cobra.Command { return eventOutput(documentOutputWhen(newExecCmd(app), "background")) }, "exec"),
		v("ops", func() *cobra.Command { return eventOutput(newReadCmd(app)) }, "read"),
		v("ops", func() *cobra.Command { return eventOutput(newWriteCmd(app)) }, "write"),
		v("ops", func() *cobra.Command { return documentOutput(newEditCmd(app)) }, "edit"),
		v("ops", func() *cobra.Command { return documentOutput(newLsCmd(app)) }, "ls"),
		v("ops", func() *cobra.Command { return documentOutput(newGlobCmd(app)) }, "glob"),
		v("ops", func() *cobra.Command { return documentOutput(newGrepCmd(app)) }, "grep"),
		v("ops", func() *cobra.Command { return parallel(eventOutput(newUploadCmd(app))) }, "upload"),
		v("ops", func() *cobra.Command { return parallel(eventOutput(newDownloadCmd(app))) }, "download"),
		v("ops", func() *cobra.Command { return parallel(eventOutput(newRunCmd(app))) }, "run"),
		v("ops", func() *cobra.Command { return eventOutput(newShellCmd(app)) }, "shell"),
		v("more", func() *cobra.Command { return newProvidersCmd(app) }, "providers"),
		v("more", func() *cobra.Command { return parallel(app.needsEngine(newServeCmd(app))) }, "serve"),
		v("more", func() *cobra.Command { return newVersionCmd(app) }, "version"),
		v("more", func() *cobra.Command { return newExitCodesCmd(app) }, "exit-codes"),
	}
}

// verbOf finds the verb args name: their first argument that is neither
// one of the root's flags nor such a flag's value. It fails on anything
// else first: "--", a flag the root does not have (-h and --help among
// them), a name no verb has.
func verbOf(vs []verb, flags *pflag.FlagSet, args []string) (verb, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return verb{}, false
		case strings.HasPrefix(a, "--"):
			name, _, inline := strings.Cut(a[2:], "=")
			f := flags.Lookup(name)
			if f == nil {
				return verb{}, false
			}
			if !inline && f.NoOptDefVal == "" {
				i++ // its value
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// Shorthands, several in one (-ye K=V) or one with its
			// value attached (-slocal).
			for k := 1; k < len(a); k++ {
				f := flags.ShorthandLookup(a[k : k+1])
				if f == nil {
					return verb{}, false
				}
				if f.NoOptDefVal == "" {
					if k == len(a)-1 {
						i++ // its value
					}
					break
				}
			}
		default:
			for _, v := range vs {
				if slices.Contains(v.names, a) {
					return v, true
				}
			}
			return verb{}, false
		}
	}
	return verb{}, false
}

// RunSystem runs the program on the process's own arguments, streams and
// environment with the providers of reg, and returns its exit status: the
// whole of a main. SIGINT and SIGTERM cancel the root context once the
// verb arms them (Deps.ArmInterrupts); a provider built into another
// program hands the run to it (ExecProgram). serve serves emulators
// (Deps.Serve), and tui is the interactive mode (Deps.TUI); each nil in a
// program that has none.
func RunSystem(reg *providers.Registry, serve ServeFunc, tui interactive.Mode) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return Main(ctx, os.Args[1:], Deps{
		Streams:       SystemStreams(),
		Registry:      reg,
		Getenv:        os.LookupEnv,
		Getwd:         os.Getwd,
		Handoff:       ExecProgram,
		ArmInterrupts: interruptsCancel(ctx, cancel),
		Serve:         serve,
		TUI:           tui,
	})
}

// interruptsCancel returns a Deps.ArmInterrupts that makes SIGINT and
// SIGTERM call cancel, for the rest of the process's life once armed
// (a second signal does not cut the clean-up the first began). Arming
// is what costs: os/signal starts a thread of its own and a goroutine
// that holds another, a tenth of a cold `sandbox exec` in all.
func interruptsCancel(ctx context.Context, cancel context.CancelFunc) func(time.Duration) {
	var once sync.Once
	arm := func() {
		once.Do(func() {
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
			go func() {
				select {
				case <-ch:
					cancel()
				case <-ctx.Done():
				}
			}()
		})
	}
	return func(after time.Duration) {
		if after <= 0 {
			arm()
			return
		}
		time.AfterFunc(after, arm)
	}
}
