package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/provision"

	"example.com/acme-autoinstall"
)

func TestRunProfile(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"profile"}, &out, io.Discard); err != nil {
		t.Fatalf("run(profile) = %v", err)
	}
	var p provision.Profile
	if err := json.Unmarshal(out.Bytes(), &p); err != nil || p.ID != autoinstall.ProfileID || len(p.Steps) != 6 {
		t.Errorf("run(profile) printed %s (%v), want the %s profile's six steps", out.String(), err, autoinstall.ProfileID)
	}
}

func TestRunRefuses(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--database-url", "postgres://x"},
		{"--database-url", "postgres://x", "--temporal-address", "h:7233", "--log-level", "loud"},
		{"--no-such-flag"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil || strings.Contains(err.Error(), "postgres://") {
			t.Errorf("run(%q) = %v, want refused before anything starts", args, err)
		}
	}
}
