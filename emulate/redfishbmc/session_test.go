package redfishbmc

import (
	"context"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// TestDriverSessions: by default the driver logs in through the
// SessionService once and keeps the session for the BMC's next operation,
// until Logout DELETEs it; a BMC without sessions is driven with basic
// authentication.
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
			want := 1
			if noSessions {
				want = 0
			}
			if st.Logins != want || st.Sessions != want || st.Power != bmc.On {
				t.Errorf("State() logins, open sessions, power = %d, %d, %s (no sessions %t), want %d, %d, on",
					st.Logins, st.Sessions, st.Power, noSessions, want, want)
			}
			d.Logout(ctx)
			if st := b.State(); st.Sessions != 0 {
				t.Errorf("State().Sessions after Logout = %d (no sessions %t), want 0", st.Sessions, noSessions)
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

// TestDriverSessionKeptIsChecked: a kept session the BMC dropped (it
// restarted, or its timeout passed) costs one fresh login, not a failed
// operation; and a driver with other credentials never rides the session
// kept for the right ones.
func TestDriverSessionKeptIsChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := start(t, Config{})
	d := driver(t, b, testUser, testPass, true)
	if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
		t.Fatalf("SetPower(on) = %v", err)
	}
	b.ExpireSessions()
	if _, err := d.SetPower(ctx, bmc.PowerOff); err != nil {
		t.Fatalf("SetPower(off) after the BMC dropped the kept session = %v, want nil", err)
	}
	if st := b.State(); st.Logins != 2 || st.FailedLogins != 0 || st.Sessions != 1 || st.Power != bmc.Off {
		t.Errorf("State() logins, failed, open, power = %d, %d, %d, %s, want 2, 0, 1, off", st.Logins, st.FailedLogins, st.Sessions, st.Power)
	}
	wrong := driver(t, b, testUser, "not-the-password", true)
	if _, err := wrong.SetPower(ctx, bmc.PowerOn); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("SetPower(on) with a wrong password beside a kept session = %v, want UNAUTHENTICATED", err)
	}
	if st := b.State(); st.FailedLogins != 1 || st.Power != bmc.Off {
		t.Errorf("State() failed logins, power = %d, %s, want 1, off", st.FailedLogins, st.Power)
	}
}
