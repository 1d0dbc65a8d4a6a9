package siteagent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// savedFrontends are the frontends join.json in dir holds.
func savedFrontends(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, JoinFile))
	if err != nil {
		t.Fatal(err)
	}
	var j joined
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %v", j.TemporalAddress, j.frontends())
}

func (a *Agent) frontendsNow() string {
	a.id.mu.Lock()
	defer a.id.mu.Unlock()
	return fmt.Sprint(a.id.frontends())
}

// TestFrontendsKeptAcrossRestartAndRenewal: the agent keeps every frontend
// its join gave across a restart, and a renewal naming others replaces
// them, in join.json too, for the next start.
func TestFrontendsKeptAcrossRestartAndRenewal(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cp.Frontends = []string{"127.0.0.1:7233", "127.0.0.1:7243"}
	cfg := joinedConfig(t, cp)
	if got, want := savedFrontends(t, cfg.DataDir), "127.0.0.1:7233 [127.0.0.1:7233 127.0.0.1:7243]"; got != want {
		t.Errorf("join.json's frontends after the join = %s, want %s", got, want)
	}
	if got, want := startAgent(t, cfg).frontendsNow(), "[127.0.0.1:7233 127.0.0.1:7243]"; got != want {
		t.Errorf("frontends after a restart = %s, want %s", got, want)
	}

	cp.RenewFrontends.Store(&[]string{"127.0.0.1:7243", "127.0.0.1:7253"})
	cfg.Now = func() time.Time { return time.Now().Add(50 * time.Minute) } // the renewal is due
	a := startAgent(t, cfg)
	want := "[127.0.0.1:7243 127.0.0.1:7253]"
	waitFor(t, "the renewal's frontends", func() bool { return a.frontendsNow() == want })
	if got := savedFrontends(t, cfg.DataDir); got != "127.0.0.1:7243 "+want {
		t.Errorf("join.json's frontends after the renewal = %s, want 127.0.0.1:7243 %s", got, want)
	}
	a.Stop()
	cfg.Now = nil
	if got := startAgent(t, cfg).frontendsNow(); got != want {
		t.Errorf("frontends after the renewal and a restart = %s, want %s", got, want)
	}
}

// TestFrontendsOfAnOldJoin: a join.json from before temporalAddresses
// holds one frontend, which the agent dials.
func TestFrontendsOfAnOldJoin(t *testing.T) {
	t.Parallel()
	var j joined
	if err := json.Unmarshal([]byte(`{"temporalAddress": "10.0.0.5:7233"}`), &j); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(j.frontends()); got != "[10.0.0.5:7233]" {
		t.Errorf("frontends of an old join.json = %s, want [10.0.0.5:7233]", got)
	}
}
