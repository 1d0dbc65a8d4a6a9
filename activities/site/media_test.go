package site

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/fake"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// TestMediaActivities: media.insert and media.eject against an emulated
// Redfish BMC served over HTTPS with a self-signed certificate, trusted
// through the target's TLS pin as the node carries it.
func TestMediaActivities(t *testing.T) {
	b, err := redfishbmc.New(redfishbmc.Config{Username: "admin", Password: "s3cret", MACs: testMACs})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(b)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a := &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverRedfish: redfishFactory},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_BMC": "admin:s3cret"}),
	}
	env := testEnv(t, a)
	const iso = "http://10.30.0.1:8080/talos.iso"
	untrusted := kinds.BMCTarget{NodeID: "node_1", Address: srv.URL, Driver: "redfish", CredentialsRef: "env://BCD_SECRET_BMC"}
	_, err = env.ExecuteActivity(kinds.MediaInsert, kinds.MediaInsertInput{BMC: untrusted, URL: iso})
	if typ, final := appError(t, err); typ != string(errs.Unauthenticated) || !final || !strings.Contains(err.Error(), bmc.FlagTLSPin) {
		t.Errorf("media.insert on an untrusted BMC = %v, want UNAUTHENTICATED, final, naming %s", err, bmc.FlagTLSPin)
	}
	pinned := untrusted
	pinned.TLS = bmc.TLS{SPKIPin: bmc.SPKIPin(srv.Certificate())}
	if _, err := env.ExecuteActivity(kinds.MediaInsert, kinds.MediaInsertInput{BMC: pinned, URL: iso}); err != nil {
		t.Fatalf("media.insert(%s) = %v", iso, err)
	}
	if st := b.State(); b.Media() != iso || st.BootTarget != "Cd" || st.BootEnabled != "Once" {
		t.Errorf("BMC media, boot after media.insert = %q, %s/%s, want %q, Cd/Once", b.Media(), st.BootTarget, st.BootEnabled, iso)
	}
	if _, err := env.ExecuteActivity(kinds.MediaEject, kinds.MediaEjectInput{BMC: pinned}); err != nil {
		t.Fatalf("media.eject = %v", err)
	}
	if got := b.Media(); got != "" {
		t.Errorf("BMC media after media.eject = %q, want none", got)
	}
	_, err = env.ExecuteActivity(kinds.MediaInsert, kinds.MediaInsertInput{BMC: pinned, URL: "http://user:pw@h/x.iso"})
	if typ, final := appError(t, err); typ != string(errs.InvalidInput) || !final || strings.Contains(err.Error(), "pw") {
		t.Errorf("media.insert with credentials in the URL = %v, want INVALID_INPUT, final, without them", err)
	}
}

// TestMediaUnsupported: a driver without virtual media (IPMI) is
// UNSUPPORTED, final, and the BMC hears nothing.
func TestMediaUnsupported(t *testing.T) {
	d := fake.New(bmc.Inventory{})
	a := &Activities{
		Drivers: map[string]DriverFactory{bmc.DriverIPMI: func(context.Context, bmc.Address, bmc.Credentials) (bmc.Driver, error) {
			return d, nil
		}},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_BMC": "admin:s3cret"}),
	}
	env := testEnv(t, a)
	target := kinds.BMCTarget{NodeID: "node_1", Address: "10.0.0.9", Driver: "ipmi", CredentialsRef: "env://BCD_SECRET_BMC"}
	for _, kind := range []string{kinds.MediaInsert, kinds.MediaEject} {
		var in any = kinds.MediaEjectInput{BMC: target}
		if kind == kinds.MediaInsert {
			in = kinds.MediaInsertInput{BMC: target, URL: "http://10.30.0.1/x.iso"}
		}
		_, err := env.ExecuteActivity(kind, in)
		if typ, final := appError(t, err); typ != string(errs.Unsupported) || !final || !strings.Contains(err.Error(), "ipmi") {
			t.Errorf("%s on an IPMI BMC = %v, want UNSUPPORTED, final, naming the driver", kind, err)
		}
	}
	for _, m := range []string{fake.SetPower, fake.PowerState, fake.SetBootDevice, fake.Inspect} {
		if n := d.Calls(m); n != 0 {
			t.Errorf("fake BMC %s calls = %d, want 0", m, n)
		}
	}
}
