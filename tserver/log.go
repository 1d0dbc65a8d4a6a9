package tserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// slogLogger routes the Temporal server's own logs to an slog.Logger, keeping
// those from a least level up (Config.LogLevel; warn unless told).
type slogLogger struct {
	log *slog.Logger
	min *slog.LevelVar // raised above error while stopping: shutdown is noisy
}

var _ log.Logger = slogLogger{}

// fatalError is what Fatal and Panic panic with, so that Start can recover a
// fatal failure during start-up and return it as an error instead of letting
// the server go on half built.
type fatalError struct{ msg string }

func (e fatalError) Error() string { return "temporal server: " + e.msg }

func (l slogLogger) Debug(msg string, tags ...tag.Tag) { l.emit(slog.LevelDebug, msg, tags) }
func (l slogLogger) Info(msg string, tags ...tag.Tag)  { l.emit(slog.LevelInfo, msg, tags) }
func (l slogLogger) Warn(msg string, tags ...tag.Tag)  { l.emit(slog.LevelWarn, msg, tags) }
func (l slogLogger) Error(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// DPanic is an error in production builds of the server.
func (l slogLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// Panic logs and panics, as the server's own logger does.
func (l slogLogger) Panic(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(fatalError{msg: msg + tagSuffix(tags)})
}

// Fatal logs and panics instead of exiting the process: during Start the
// panic is recovered and returned as an error.
func (l slogLogger) Fatal(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(fatalError{msg: msg + tagSuffix(tags)})
}

func (l slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < l.min.Level() || !l.log.Enabled(context.Background(), level) {
		return
	}
	if level == slog.LevelWarn && strings.HasPrefix(msg, "HTTP API port has not been set") {
		return // we run no HTTP API and no Nexus on purpose
	}
	attrs := make([]slog.Attr, 0, len(tags)+1)
	attrs = append(attrs, slog.String("component", "temporal"))
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	l.log.LogAttrs(context.Background(), level, msg, attrs...)
}

func tagSuffix(tags []tag.Tag) string {
	s := ""
	for _, t := range tags {
		s += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
	}
	return s
}
