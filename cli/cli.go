// Package cli owns the better-compute command line: a Connect client that speaks
// JSON to the control plane's API (client.go), the typed command tree (tenants,
// sites, site-tokens, pools, images, profiles, hardware-profiles, workflows,
// metal, commands), the generic `api` command that calls any method by name
// from the generated descriptors, and how results (table, JSON, JMESPath) and
// errors are printed.
// The main adds the commands that are not API calls (serve, pki init, demo).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/errs"
)

const (
	defaultURL     = "http://127.0.0.1:7780"
	defaultDataDir = ".better-compute"
)

// App returns the command tree. stdout gets results, stderr notes and errors.
// extra commands (serve, pki, demo) are appended as they are. App never exits
// the process: Main or the caller turns the error into an exit code.
func App(stdout, stderr io.Writer, extra ...*cli.Command) *cli.App {
	own := []*cli.Command{
		apiCommand(),
		tenantsCommand(),
		sitesCommand(),
		siteTokensCommand(),
		poolsCommand(),
		imagesCommand(),
		profilesCommand(),
		hardwareProfilesCommand(),
		workflowsCommand(),
		metalCommand(),
		commandsCommand(),
		secretsCommand(),
	}
	for _, c := range own {
		prepare(c)
	}
	for _, c := range extra {
		prepareExtra(c)
	}
	return &cli.App{
		Name:           "better-compute",
		Usage:          "provision bare metal through a better-compute control plane",
		Writer:         stdout,
		ErrWriter:      stderr,
		Flags:          globalFlags(),
		Commands:       append(own, extra...),
		HideVersion:    true,
		Action:         groupAction,
		OnUsageError:   usageError,
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

// Main runs the command line with args (args[0] is the program name), prints an
// error as "error: KIND: message" to stderr and returns the exit code: 0 on
// success, 2 for INVALID_INPUT and usage errors, 1 otherwise.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...*cli.Command) int {
	return Run(ctx, App(stdout, stderr, extra...), args, stderr)
}

// Run is Main for an App the caller completed (its version, completion).
func Run(ctx context.Context, app *cli.App, args []string, stderr io.Writer) int {
	err := app.RunContext(ctx, args)
	if errors.Is(err, errHelpShown) {
		return 0
	}
	if err != nil && strings.HasPrefix(err.Error(), "Required flag") { // urfave/cli's own check, before any action
		err = errs.Invalid("", "%v", err)
	}
	if err != nil {
		PrintError(stderr, err)
	}
	return ExitCode(err)
}

// ExitCode is the process exit code for err.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	var e *errs.Error
	if errors.As(err, &e) {
		if e.Kind == errs.InvalidInput {
			return 2
		}
		return 1
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) && coder.ExitCode() != 0 {
		return coder.ExitCode()
	}
	return 1
}

// PrintError writes err for an operator: "error: KIND: message", plus
// " (field F)" for INVALID_INPUT. Errors that carry no kind print as they are.
func PrintError(w io.Writer, err error) {
	var exit *exitError
	var e *errs.Error
	switch {
	case errors.As(err, &exit):
		fmt.Fprintf(w, "error: %s\n", exit.msg)
	case errors.As(err, &e):
		msg := e.Msg
		if e.Err != nil {
			if msg != "" {
				msg += ": "
			}
			msg += e.Err.Error()
		}
		line := fmt.Sprintf("error: %s: %s", e.Kind, msg)
		if e.Kind == errs.InvalidInput && e.Field != "" {
			line += fmt.Sprintf(" (field %s)", e.Field)
		}
		fmt.Fprintln(w, line)
	default:
		fmt.Fprintf(w, "error: %v\n", err)
	}
}

// exitError ends a command that already printed its result with a non-zero
// code, such as profiles validate on an invalid profile.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// prepare walks our own commands: groups reject unknown subcommands, leaves
// take the output flags, and every command reports usage errors as INVALID_INPUT.
func prepare(c *cli.Command) {
	c.OnUsageError = usageError
	if len(c.Subcommands) > 0 {
		c.Action = groupAction
		for _, s := range c.Subcommands {
			prepare(s)
		}
		return
	}
	c.Flags = append(c.Flags, outputFlags()...)
}

// Prepare gives another program's command tree (bcd's) better-compute's
// usage errors, unknown-subcommand handling and error exits: run it with Run.
func Prepare(app *cli.App) {
	if app.Action == nil {
		app.Action = groupAction
	}
	app.OnUsageError = usageError
	app.ExitErrHandler = func(*cli.Context, error) {}
	for _, c := range app.Commands {
		prepareExtra(c)
	}
}

// prepareExtra gives the caller's commands the same usage errors and unknown
// subcommand handling, leaving their flags and actions alone.
func prepareExtra(c *cli.Command) {
	if c.OnUsageError == nil {
		c.OnUsageError = usageError
	}
	if len(c.Subcommands) > 0 && c.Action == nil {
		c.Action = groupAction
	}
	for _, s := range c.Subcommands {
		prepareExtra(s)
	}
}

// groupAction runs when a group (or the root) is called without a known
// subcommand: help when nothing was given, a usage error otherwise.
func groupAction(c *cli.Context) error {
	if c.Args().Present() {
		return errs.Invalid("command", "unknown command %q; run %q for the list", c.Args().First(), helpName(c)+" --help")
	}
	return cli.ShowSubcommandHelp(c)
}

func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return c.App.Name
}

func usageError(c *cli.Context, err error, _ bool) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		if g := globalFlag(c, strings.TrimLeft(name, "-")); g != nil {
			return g
		}
	}
	return errs.Invalid("", "%v (see %s --help)", err, helpName(c))
}

// globalFlag is the error for a global option (--url, --token…) given after
// the command, where urfave/cli does not take it: where it goes instead, and
// its environment variable. nil when name is no global option.
func globalFlag(c *cli.Context, name string) error {
	f := flagNamed(c.App.Flags, name)
	if f == nil {
		return nil
	}
	env := ""
	if e, ok := f.(interface{ GetEnvVars() []string }); ok && len(e.GetEnvVars()) > 0 {
		env = ", or set " + e.GetEnvVars()[0]
	}
	return errs.Invalid(name, "--%s is a global option: give it before the command (%s --%s … %s)%s",
		name, c.App.Name, name, strings.TrimPrefix(helpName(c), c.App.Name+" "), env)
}
