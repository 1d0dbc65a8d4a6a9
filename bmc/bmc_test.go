package bmc

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestParsePowerAction(t *testing.T) {
	t.Parallel()
	for _, a := range PowerActions() {
		if got, err := ParsePowerAction(string(a)); err != nil || got != a {
			t.Errorf("ParsePowerAction(%q) = %q, %v, want %q, nil", a, got, err, a)
		}
	}
	for _, bad := range []string{"", "On", "power-on", "restart", "cycle "} {
		_, err := ParsePowerAction(bad)
		var e *errs.Error
		if !errs.Is(err, errs.InvalidInput) || !errors.As(err, &e) || e.Field != "action" {
			t.Errorf("ParsePowerAction(%q) = %v, want INVALID_INPUT on field action", bad, err)
		}
	}
}

func TestParseBootDevice(t *testing.T) {
	t.Parallel()
	for _, d := range BootDevices() {
		if got, err := ParseBootDevice(string(d)); err != nil || got != d {
			t.Errorf("ParseBootDevice(%q) = %q, %v, want %q, nil", d, got, err, d)
		}
	}
	for _, bad := range []string{"", "PXE", "hdd", "usb", "network"} {
		_, err := ParseBootDevice(bad)
		var e *errs.Error
		if !errs.Is(err, errs.InvalidInput) || !errors.As(err, &e) || e.Field != "device" {
			t.Errorf("ParseBootDevice(%q) = %v, want INVALID_INPUT on field device", bad, err)
		}
	}
}

func TestCredentialsNeverPrintPassword(t *testing.T) {
	t.Parallel()
	c := Credentials{Username: "admin", Password: "s3cr3t-pw"}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("login", "creds", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("login", "creds", c, "ptr", &c)
	outs := map[string]string{
		"String": c.String(),
		"%v":     fmt.Sprintf("%v", c),
		"%+v":    fmt.Sprintf("%+v", c),
		"%#v":    fmt.Sprintf("%#v", c),
		"%s ptr": fmt.Sprintf("%s", &c),
		"slog":   logged.String(),
	}
	for how, out := range outs {
		if strings.Contains(out, "s3cr3t") {
			t.Errorf("Credentials printed with %s = %q, want no password", how, out)
		}
		if !strings.Contains(out, "admin") {
			t.Errorf("Credentials printed with %s = %q, want the username", how, out)
		}
	}
}
