package ipmi

import (
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
)

// Shorter names for the simulated BMC's constants.
const (
	simUser = ipmisim.User
	simPass = ipmisim.Password
	simGUID = ipmisim.GUID
	simUUID = ipmisim.UUID
)

// driverFor returns the IPMI driver for s with password pass, addressed the
// way operators enroll it.
func driverFor(t testing.TB, s *ipmisim.Sim, pass string, cfg Config) *Driver {
	t.Helper()
	addr, err := bmc.ParseAddress(bmc.DriverIPMI, s.Address())
	if err != nil {
		t.Fatalf("ParseAddress(%q) = %v", s.Address(), err)
	}
	cfg.Address, cfg.Credentials = addr, bmc.Credentials{Username: simUser, Password: pass}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return d
}
