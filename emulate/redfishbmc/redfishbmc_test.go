package redfishbmc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stmcginnis/gofish"
)

// do sends one request with basic auth (when user is set) and returns the status
// and the decoded body.
func do(t *testing.T, method, url, user, pass string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s = %v", method, url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup})
		tests := []struct {
			method, path, user, pass string
			want                     int
		}{
			{"GET", "/redfish/v1/", "", "", 200},
			{"GET", "/redfish/v1", "", "", 200},
			{"GET", b.systemPath, "", "", 401},
			{"GET", b.systemPath, testUser, "wrong", 401},
			{"GET", b.systemPath, "root", testPass, 401},
			{"GET", b.systemPath, testUser, testPass, 200},
			{"GET", "/redfish/v1/Systems", testUser, testPass, 200},
			{"GET", "/redfish/v1/NoSuchThing", testUser, testPass, 404},
			{"POST", b.resetPath, "", "", 401},
			{"PATCH", b.systemPath, testUser, "", 401},
			{"DELETE", b.systemPath, testUser, testPass, 405},
		}
		for _, tt := range tests {
			if got, _ := do(t, tt.method, b.URL()+tt.path, tt.user, tt.pass, map[string]any{}); got != tt.want {
				t.Errorf("%s %s as %q = %d, want %d", tt.method, tt.path, tt.user, got, tt.want)
			}
		}
	})
}

func TestSessionLogin(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	login := b.URL() + defaultSessions
	if got, _ := do(t, "POST", login, "", "", map[string]string{"UserName": testUser, "Password": "nope"}); got != 401 {
		t.Errorf("POST %s with a wrong password = %d, want 401", login, got)
	}
	data, _ := json.Marshal(map[string]string{"UserName": testUser, "Password": testPass})
	resp, err := http.Post(login, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tok, loc := resp.Header.Get("X-Auth-Token"), resp.Header.Get("Location")
	if resp.StatusCode != 201 || tok == "" || !strings.HasPrefix(loc, defaultSessions+"/") {
		t.Fatalf("POST %s = %d, token %t, Location %q, want 201 with a token and a session", login, resp.StatusCode, tok != "", loc)
	}
	req, _ := http.NewRequest("GET", b.SystemURL(), nil)
	req.Header.Set("X-Auth-Token", tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s with a session token = %v, %v, want 200", b.SystemURL(), resp, err)
	} else {
		resp.Body.Close()
	}
	if got := b.State().Sessions; got != 1 {
		t.Errorf("State().Sessions = %d, want 1", got)
	}
	req, _ = http.NewRequest("DELETE", b.URL()+loc, nil)
	req.Header.Set("X-Auth-Token", tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE %s = %v, %v, want 204", loc, resp, err)
	} else {
		resp.Body.Close()
	}
	if got := b.State().Sessions; got != 0 {
		t.Errorf("State().Sessions after logout = %d, want 0", got)
	}
}

func TestPatchBoot(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup})
		tests := []struct {
			body map[string]any
			want int
		}{
			{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Floppy"}}, 400},
			{map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Sometimes"}}, 400},
			{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": 7}}, 400},
			{map[string]any{"Boot": map[string]any{"BootOrder": []string{"a"}}}, 400},
			{map[string]any{"PowerState": "On"}, 400},
			{map[string]any{"Boot": "Pxe"}, 400},
			{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}}, 204},
			{map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}}, 204},
			{map[string]any{"@odata.etag": "W/\"1\""}, 204}, // changes nothing: not a call
		}
		for _, tt := range tests {
			if got, _ := do(t, "PATCH", b.SystemURL(), testUser, testPass, tt.body); got != tt.want {
				t.Errorf("PATCH %v = %d, want %d", tt.body, got, tt.want)
			}
		}
		st := b.State()
		if st.BootTarget != "Pxe" || st.BootEnabled != "Continuous" {
			t.Errorf("State() boot = %s/%s, want Pxe/Continuous (the bad PATCHes must change nothing)", st.BootTarget, st.BootEnabled)
		}
		if diff := cmp.Diff([]string{"boot:Pxe/Continuous", "boot:-/-/Legacy"}, st.Calls); diff != "" {
			t.Errorf("State().Calls: only accepted PATCHes that set Boot are calls (-want +got):\n%s", diff)
		}
		_, sys := do(t, "GET", b.SystemURL(), testUser, testPass, nil)
		if got := dig(sys, "Boot", "BootSourceOverrideTarget"); got != "Pxe" {
			t.Errorf("GET system Boot.BootSourceOverrideTarget = %v, want Pxe", got)
		}
	})
}

func TestResetAndBootHook(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		boots := make(chan bmc.BootDevice, 10)
		b := start(t, Config{MockupDir: mockup, OnBoot: func(d bmc.BootDevice) { boots <- d }})
		reset := func(rt string, want int) {
			t.Helper()
			if got, _ := do(t, "POST", b.URL()+b.resetPath, testUser, testPass, map[string]string{"ResetType": rt}); got != want {
				t.Fatalf("POST Reset %s = %d, want %d", rt, got, want)
			}
		}
		do(t, "PATCH", b.SystemURL(), testUser, testPass, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}})
		reset("On", 204)
		if got := waitBoot(t, boots); got != bmc.BootPXE {
			t.Errorf("first boot device = %q, want pxe", got)
		}
		reset("ForceRestart", 204)
		if got := waitBoot(t, boots); got != bmc.BootDisk {
			t.Errorf("boot after the Once override was used = %q, want disk", got)
		}
		reset("ForceOff", 204)
		reset("Bogus", 400)
		reset("", 400)
		want := State{Power: bmc.Off, BootTarget: "Pxe", BootEnabled: "Disabled", BootMode: "UEFI", Boots: 2, LastBootDevice: bmc.BootDisk,
			Resets: map[string]int{"On": 1, "ForceRestart": 1, "ForceOff": 1},
			Calls:  []string{"boot:Pxe/Once", "power:On", "power:ForceRestart", "power:ForceOff"}}
		if diff := cmp.Diff(want, b.State(), cmpopts.IgnoreFields(State{}, "Requests")); diff != "" {
			t.Errorf("State() mismatch (-want +got):\n%s", diff)
		}
	})
}

func waitBoot(t *testing.T, boots <-chan bmc.BootDevice) bmc.BootDevice {
	t.Helper()
	select {
	case d := <-boots:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("OnBoot was not called within 5s")
		return ""
	}
}

// TestGofishWalk has gofish, a generic Redfish client, walk the service root,
// systems, managers and chassis with basic and with session authentication.
func TestGofishWalk(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup})
		for _, basic := range []bool{true, false} {
			c, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: testPass, BasicAuth: basic})
			if err != nil {
				t.Fatalf("gofish.Connect(basic=%t) = %v", basic, err)
			}
			systems, err := c.Service.Systems()
			if err != nil || len(systems) != 1 {
				t.Fatalf("Systems() = %d systems, %v, want 1", len(systems), err)
			}
			if got := strings.ToLower(systems[0].UUID); got != testUUID {
				t.Errorf("Systems()[0].UUID = %q, want %q", got, testUUID)
			}
			nics, err := systems[0].EthernetInterfaces()
			if err != nil || len(nics) != len(testMACs()) {
				t.Errorf("EthernetInterfaces() = %d, %v, want %d", len(nics), err, len(testMACs()))
			}
			managers, err := c.Service.Managers()
			if err != nil || len(managers) == 0 || managers[0].FirmwareVersion == "" {
				t.Errorf("Managers() = %d, %v, want at least one with a firmware version", len(managers), err)
			}
			if chassis, err := c.Service.Chassis(); err != nil || len(chassis) == 0 {
				t.Errorf("Chassis() = %d, %v, want at least one", len(chassis), err)
			}
			if _, err := c.Service.SessionService(); err != nil {
				t.Errorf("SessionService() = %v", err)
			}
			c.Logout()
		}
		if got := b.State().Sessions; got != 0 {
			t.Errorf("State().Sessions after Logout = %d, want 0", got)
		}
	})
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	tests := []Config{
		{},
		{Username: "a", UUID: "not-a-uuid"},
		{Username: "a", MACs: []string{"52:54:00:zz:00:01"}},
		{Username: "a", DefaultBoot: "floppy"},
		{Username: "a", MockupDir: t.TempDir()},
	}
	for _, cfg := range tests {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error, want an error", cfg)
		}
	}
}
