package redfishbmc

import (
	"context"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// TestDriverSessions: by default the driver logs in through the
// SessionService for each operation and DELETEs the session at its end; a
// BMC without sessions is driven with basic authentication.
func TestDriverSessions(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		for _, noSessions := range []bool{false, true} {
			b := start(t, Config{MockupDir: mockup, NoSessions: noSessions})
			d := driver(t, b, testUser, testPass, true)
			if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
				t.Fatalf("SetPower(on), no sessions %t = %v", noSessions, err)
			}
			if _, err := d.Inspect(ctx); err != nil {
				t.Fatalf("Inspect(), no sessions %t = %v", noSessions, err)
			}
			st := b.State()
			wantLogins := 2
			if noSessions {
				wantLogins = 0
			}
			if st.Logins != wantLogins || st.Sessions != 0 || st.Power != bmc.On {
				t.Errorf("State() logins, open sessions, power = %d, %d, %s (no sessions %t), want %d, 0, on",
					st.Logins, st.Sessions, st.Power, noSessions, wantLogins)
			}
		}
	})
}

// TestDriverSessionWrongPassword: a refused login is one attempt, never
// followed by basic authentication (each failure counts towards a lockout).
func TestDriverSessionWrongPassword(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	d := driver(t, b, testUser, "not-the-password", true)
	if _, err := d.SetPower(context.Background(), bmc.PowerOn); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("SetPower(on) with a wrong password = %v, want UNAUTHENTICATED", err)
	}
	if st := b.State(); st.FailedLogins != 1 || st.Logins != 0 {
		t.Errorf("State() failed, accepted logins = %d, %d, want 1, 0", st.FailedLogins, st.Logins)
	}
}
