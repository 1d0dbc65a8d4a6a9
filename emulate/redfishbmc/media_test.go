package redfishbmc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	bmcredfish "github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/errs"
)

// TestDriverMedia inserts and ejects an ISO through the driver: on the
// Manager's drive of our own tree, and on the System's drive of the DMTF
// mockup (which starts with an image inserted).
func TestDriverMedia(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		boots := make(chan bmc.BootDevice, 8)
		b := start(t, Config{MockupDir: mockup, OnBoot: func(d bmc.BootDevice) { boots <- d }})
		d := driver(t, b, testUser, testPass, true)
		const iso, other = "http://10.30.0.1:8080/images/talos-1.8.iso", "https://cache.site-a/autoinstall/ab12.iso"
		for range 2 { // twice: the second finds the image in place
			if err := d.InsertMedia(ctx, iso); err != nil {
				t.Fatalf("InsertMedia(%s) = %v", iso, err)
			}
		}
		if got := b.Media(); got != iso {
			t.Errorf("Media() after InsertMedia = %q, want %q", got, iso)
		}
		st := b.State()
		if st.BootTarget != "Cd" || st.BootEnabled != "Once" {
			t.Errorf("State() boot after InsertMedia = %s/%s, want Cd/Once", st.BootTarget, st.BootEnabled)
		}
		if n := count(st.Calls, "media:insert:"+iso); n != 1 {
			t.Errorf("State().Calls = %v, want one insert of %s", st.Calls, iso)
		}
		if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
			t.Fatalf("SetPower(on) = %v", err)
		}
		if got := waitBoot(t, boots); got != bmc.BootCD {
			t.Errorf("OnBoot after InsertMedia and on = %q, want cd", got)
		}
		if err := d.InsertMedia(ctx, other); err != nil { // another image: eject, then insert
			t.Fatalf("InsertMedia(%s) = %v", other, err)
		}
		calls := b.State().Calls
		if tail := strings.Join(calls[len(calls)-3:], " "); tail != "media:eject media:insert:"+other+" boot:Cd/Once" {
			t.Errorf("State().Calls end = %q, want eject, insert %s, boot Cd/Once", tail, other)
		}
		for range 2 {
			if err := d.EjectMedia(ctx); err != nil {
				t.Fatalf("EjectMedia() = %v", err)
			}
		}
		if got := b.Media(); got != "" {
			t.Errorf("Media() after EjectMedia = %q, want empty", got)
		}
		if n := count(b.State().Calls, "media:eject"); n != count(calls, "media:eject")+1 {
			t.Errorf("State().Calls = %v, want one more eject (the second EjectMedia finds the drive empty)", b.State().Calls)
		}
		d.Logout(ctx)
		if st := b.State(); st.Sessions != 0 || st.Logins == 0 {
			t.Errorf("State() sessions open, logins = %d, %d, want 0 open and the driver logged in", st.Sessions, st.Logins)
		}
	})
}

func TestDriverMediaRefusesBadURL(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	d := driver(t, b, testUser, testPass, false)
	for _, url := range []string{"", "ftp://h/x.iso", "http://user:pw@h/x.iso", "http:///x.iso", "http://h/x .iso", "http://h/x.iso#f"} {
		if err := d.InsertMedia(context.Background(), url); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("InsertMedia(%q) = %v, want INVALID_INPUT", url, err)
		}
	}
	if calls := b.State().Calls; len(calls) != 0 {
		t.Errorf("State().Calls = %v after refused inserts, want none", calls)
	}
}

func count(xs []string, want string) int {
	n := 0
	for _, x := range xs {
		if x == want {
			n++
		}
	}
	return n
}

// TestDriverMediaNotConfirmed: a BMC that accepts InsertMedia but does not
// show the image afterwards (it could not fetch it) is a DRIVER_ERROR naming
// the URL, and the boot override is left alone.
func TestDriverMediaNotConfirmed(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	swallow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, insertAction) {
			w.WriteHeader(http.StatusNoContent) // accepted, never applied
			return
		}
		b.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(swallow)
	t.Cleanup(srv.Close)
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, strings.Replace(srv.URL, "http://", "redfish+http://", 1)+b.systemPath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := bmcredfish.New(bmcredfish.Config{Address: addr, Credentials: bmc.Credentials{Username: testUser, Password: testPass}})
	if err != nil {
		t.Fatal(err)
	}
	const iso = "http://10.30.0.1:8080/missing.iso"
	if err := d.InsertMedia(context.Background(), iso); !errs.Is(err, errs.DriverError) || !strings.Contains(err.Error(), iso) {
		t.Errorf("InsertMedia(%s) on a BMC that does not show it = %v, want DRIVER_ERROR naming the URL", iso, err)
	}
	if st := b.State(); st.BootTarget != "None" {
		t.Errorf("State().BootTarget = %q after an unconfirmed insert, want None", st.BootTarget)
	}
}
