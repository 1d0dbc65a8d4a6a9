// Package logflag owns what every long-running command of better-compute
// and bcd does with its --log-level and --log-format flags: the format
// flag, refused at start unless text or json, and the logger the two make.
package logflag

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/errs"
)

// Format is --log-format, refused at start unless text or json.
func Format() *cli.StringFlag {
	return &cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json (one object a line)",
		Action: func(_ *cli.Context, v string) error {
			if v != "text" && v != "json" {
				return errs.Invalid("log-format", "--log-format %q: want text or json", v)
			}
			return nil
		}}
}

// Logger writes to the app's error stream from --log-level (info when not
// a level), as text or, with --log-format json, one JSON object a line. It
// becomes the process's default logger, so what a library writes with the
// standard log package (the Temporal Web UI server does, as it loads its
// TLS files) comes out through it too, as info, in the same format: not a
// bare line in a JSON log, nor a line below --log-level.
func Logger(c *cli.Context) *slog.Logger {
	opts := &slog.HandlerOptions{Level: ParseLevel(c.String("log-level"), slog.LevelInfo)}
	var h slog.Handler = slog.NewTextHandler(c.App.ErrWriter, opts)
	if c.String("log-format") == "json" {
		h = slog.NewJSONHandler(c.App.ErrWriter, opts)
	}
	l := slog.New(h)
	slog.SetDefault(l)
	return l
}

// ParseLevel reads debug, info, warn or error; anything else is def.
func ParseLevel(level string, def slog.Level) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return def
	}
	return l
}
