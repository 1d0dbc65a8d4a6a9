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
// a level), as text or, with --log-format json, one JSON object a line.
func Logger(c *cli.Context) *slog.Logger {
	opts := &slog.HandlerOptions{Level: ParseLevel(c.String("log-level"), slog.LevelInfo)}
	if c.String("log-format") == "json" {
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts))
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts))
}

// ParseLevel reads debug, info, warn or error; anything else is def.
func ParseLevel(level string, def slog.Level) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return def
	}
	return l
}
