package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
)

// TestVersion: `bcd --version` prints the version line with the Go version.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	a := app()
	a.Writer = &out
	if err := a.RunContext(t.Context(), []string{"bcd", "--version"}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "bcd version ") || !strings.Contains(got, "(commit ") ||
		!strings.Contains(got, runtime.Version()) {
		t.Errorf("bcd --version = %q, want bcd version <v> (commit <c>, %s)", got, runtime.Version())
	}
}

// TestLogFormatJSON: every long-running command takes --log-format, and
// `bcd ramdisk --log-format json` logs one JSON object a line (the agent
// logs its start, then retries a relay that does not exist until stopped).
func TestLogFormatJSON(t *testing.T) {
	for _, c := range app().Commands {
		found := false
		for _, f := range c.Flags {
			found = found || f.Names()[0] == "log-format"
		}
		if !found {
			t.Errorf("bcd %s has no --log-format", c.Name)
		}
	}
	tok, _ := pki.NewToken(pki.TokenDiscovery)
	cmdline := filepath.Join(t.TempDir(), "cmdline")
	line := "bc.site=https://127.0.0.1:9 bc.node=" + ids.New(ids.Node) + " bc.token=" + string(tok) +
		" bc.ca=" + strings.Repeat("ab", 32)
	if err := os.WriteFile(cmdline, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a := app()
	a.ErrWriter = &logs
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := a.RunContext(ctx, []string{"bcd", "ramdisk", "--cmdline-file", cmdline, "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil || m["level"] == nil {
			t.Errorf("bcd ramdisk --log-format json logged %q, want a JSON object with msg and level (%v)", l, err)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"ramdisk: starting"`) {
		t.Errorf("bcd ramdisk --log-format json logged %q, want its start", logs.String())
	}
	if err := app().RunContext(t.Context(), []string{"bcd", "ramdisk", "--log-format", "yaml"}); err == nil ||
		!strings.Contains(err.Error(), "--log-format") {
		t.Errorf("bcd ramdisk --log-format yaml = %v, want an error naming --log-format", err)
	}
}
