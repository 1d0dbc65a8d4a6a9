package main

import (
	"bytes"
	"encoding/json"
	stdlog "log"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	bccli "github.com/better-compute/better-compute/cli"
	"github.com/better-compute/better-compute/internal/logflag"
)

// run is `better-compute args...`: its exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := bccli.Run(t.Context(), app(&out, &errOut), append([]string{"better-compute"}, args...), &errOut)
	return code, out.String(), errOut.String()
}

// TestVersion: --version prints the version, the commit and the Go version.
func TestVersion(t *testing.T) {
	code, out, _ := run(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "better-compute version ") || !strings.Contains(out, "(commit ") ||
		!strings.Contains(out, runtime.Version()) {
		t.Errorf("better-compute --version = %d %q, want 0 and better-compute version <v> (commit <c>, %s)", code, out, runtime.Version())
	}
}

// TestCompletion: each script names the program and the bash and zsh ones
// ask it for the next words, which it answers from its command tree.
func TestCompletion(t *testing.T) {
	tests := []struct{ shell, want string }{
		{"bash", "complete -o bashdefault -o default -F _better_compute better-compute"},
		{"zsh", "compdef _better_compute better-compute"},
		{"fish", "complete -r -c better-compute -n '__fish_seen_subcommand_from metal' -a 'deploy'"},
	}
	for _, tt := range tests {
		code, out, errOut := run(t, "completion", tt.shell)
		if code != 0 || !strings.Contains(out, tt.want) {
			t.Errorf("better-compute completion %s = %d %q (%s), want a script containing %q", tt.shell, code, out, errOut, tt.want)
		}
	}
	if code, _, _ := run(t, "completion", "tcsh"); code != 2 {
		t.Errorf("better-compute completion tcsh = %d, want 2", code)
	}
	words := map[string][]string{
		"":      {"metal", "serve", "completion"},
		"metal": {"deploy", "discovered"},
	}
	for cmd, want := range words {
		args := append(strings.Fields(cmd), "--generate-bash-completion")
		// urfave/cli reads the word before the cursor from os.Args, not from
		// the args it runs with: make them the binary's.
		saved := os.Args
		os.Args = append([]string{"better-compute"}, args...)
		_, out, _ := run(t, args...)
		os.Args = saved
		for _, w := range want {
			if !strings.Contains("\n"+out, "\n"+w+"\n") {
				t.Errorf("better-compute %s --generate-bash-completion = %q, want %q among them", cmd, out, w)
			}
		}
	}
}

// TestLogFormat: serve and demo take --log-format; json is one JSON object
// a line on the error stream, and anything but text or json is refused.
func TestLogFormat(t *testing.T) {
	for _, c := range app(nil, nil).Commands {
		if c.Name != "serve" && c.Name != "demo" {
			continue
		}
		found := false
		for _, f := range c.Flags {
			found = found || f.Names()[0] == "log-format"
		}
		if !found {
			t.Errorf("better-compute %s has no --log-format", c.Name)
		}
	}
	var logs bytes.Buffer
	probe := &cli.App{ErrWriter: &logs, Flags: []cli.Flag{&cli.StringFlag{Name: "log-level", Value: "info"}, logflag.Format()},
		Action: func(c *cli.Context) error {
			log := logflag.Logger(c)
			log.Info("one", "k", "v")
			log.Debug("hidden")
			stdlog.Printf("loaded new tls key pair") // as the Temporal Web UI server logs
			log.Warn("two", "n", 2)
			return nil
		}}
	prev := slog.Default()
	t.Cleanup(func() {
		slog.SetDefault(prev)
		stdlog.SetOutput(os.Stderr)
		stdlog.SetFlags(stdlog.LstdFlags)
	})
	if err := probe.Run([]string{"probe", "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var msgs []string
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--log-format json logged %q: %v", l, err)
		}
		msgs = append(msgs, m["msg"].(string))
	}
	if got, want := strings.Join(msgs, ","), "one,loaded new tls key pair,two"; got != want {
		t.Errorf("--log-format json messages = %q, want %q (a standard-library log line as one of them)", got, want)
	}
	if code, _, errOut := run(t, "serve", "--log-format", "xml"); code != 2 || !strings.Contains(errOut, "log-format") {
		t.Errorf("better-compute serve --log-format xml = %d %q, want 2 naming log-format", code, errOut)
	}
}
