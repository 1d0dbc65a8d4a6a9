package nodestate

import "testing"

func TestCheckRetry(t *testing.T) {
	for _, tt := range []struct {
		from, to State
		ok       bool
	}{
		{Failed, Deploying, true},
		{Failed, Enrolling, true},
		{Failed, Releasing, true},
		{Failed, Ready, false}, // never into a resting state: ready needs an attested wipe
		{Failed, Deployed, false},
		{Failed, Failed, false},
		{Deployed, Deploying, false},
		{Ready, Deploying, false},
	} {
		if err := CheckRetry(tt.from, tt.to); (err == nil) != tt.ok {
			t.Errorf("CheckRetry(%s, %s) = %v, want allowed %v", tt.from, tt.to, err, tt.ok)
		}
	}
}
