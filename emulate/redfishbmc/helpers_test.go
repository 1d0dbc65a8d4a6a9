package redfishbmc

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/better-compute/better-compute/internal/testenv"
)

const (
	testUser = "admin"
	testPass = "emulated-pw-7"
	testUUID = "4c4c4544-0042-3410-8057-b4c04f4d3332"
)

func testMACs() []string { return []string{"52:54:00:12:34:01", "52:54:00:12:34:02"} }

// mockupDir finds the DMTF public-rackmount1 mockup: $BC_REDFISH_MOCKUP, else
// shared/peers/redfish/public-rackmount1 in the working directory or one of its
// parents. When the mockup is absent the test is skipped, and in CI it fails
// (testenv.Missing).
func mockupDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("BC_REDFISH_MOCKUP"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "index.json")); err != nil {
			t.Fatalf("BC_REDFISH_MOCKUP=%s has no index.json: %v", d, err)
		}
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		d := filepath.Join(dir, "shared", "peers", "redfish", "public-rackmount1")
		if _, err := os.Stat(filepath.Join(d, "index.json")); err == nil {
			return d
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	testenv.Missing(t, "the DMTF Redfish mockup public-rackmount1 (index.json)",
		"set BC_REDFISH_MOCKUP to its directory or put it at shared/peers/redfish/public-rackmount1 in a parent of "+wd)
	return ""
}

// eachTree runs fn against our own tree and against one seeded from the DMTF
// mockup (see mockupDir for when it is absent).
func eachTree(t *testing.T, fn func(t *testing.T, mockup string)) {
	t.Helper()
	t.Run("builtin", func(t *testing.T) {
		t.Parallel()
		fn(t, "")
	})
	t.Run("mockup", func(t *testing.T) {
		t.Parallel()
		fn(t, mockupDir(t))
	})
}

// start runs an emulated BMC on a loopback port until the test ends.
func start(t *testing.T, cfg Config) *BMC {
	t.Helper()
	if cfg.Username == "" {
		cfg.Username, cfg.Password = testUser, testPass
	}
	if cfg.UUID == "" {
		cfg.UUID = testUUID
	}
	if cfg.MACs == nil {
		cfg.MACs = testMACs()
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.Start(ln)
	t.Cleanup(func() { _ = b.Close() })
	return b
}
