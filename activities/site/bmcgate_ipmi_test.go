package site

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// watched counts the driver calls open at once (each is one conversation
// with the BMC: it logs in, acts and logs out) and their highest number.
type watched struct{ open, high atomic.Int32 }

func (w *watched) factory(f DriverFactory) DriverFactory {
	return func(ctx context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
		d, err := f(ctx, addr, creds)
		if err != nil {
			return nil, err
		}
		return &watchedDriver{Driver: d, w: w}, nil
	}
}

func (w *watched) call(fn func() error) error {
	n := w.open.Add(1)
	defer w.open.Add(-1)
	for h := w.high.Load(); n > h && !w.high.CompareAndSwap(h, n); h = w.high.Load() {
	}
	return fn()
}

type watchedDriver struct {
	bmc.Driver
	w *watched
}

func (d *watchedDriver) SetPower(ctx context.Context, a bmc.PowerAction) (r bmc.PowerResult, err error) {
	err = d.w.call(func() error { r, err = d.Driver.SetPower(ctx, a); return err })
	return r, err
}

// ipmiFactory opens IPMI drivers with the driver's own patience for an
// answer (1 s an exchange, 2 retries): ipmi_sim runs its chassis script for
// each power request, which on a loaded machine (CI runs these beside the
// demo's tests) can take longer than the breaker test's 100 ms.
func ipmiFactory(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
	return ipmi.New(ipmiConfig(addr, creds))
}

func ipmiConfig(addr bmc.Address, creds bmc.Credentials) ipmi.Config {
	return ipmi.Config{Address: addr, Credentials: creds, Timeout: 5 * time.Second, Confirm: bmc.Confirm{Timeout: 5 * time.Second}}
}

// impatientIPMI opens IPMI drivers as ipmiFactory does, or, while on, ones
// that give up on a silent BMC in 200 ms: the breaker test's paused BMC.
type impatientIPMI struct{ on atomic.Bool }

func (p *impatientIPMI) factory(ctx context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
	if !p.on.Load() {
		return ipmiFactory(ctx, addr, creds)
	}
	cfg := ipmiConfig(addr, creds)
	cfg.Exchange, cfg.Retries = 100*time.Millisecond, 1
	return ipmi.New(cfg)
}

const simCredsRef = "env://BCD_SECRET_SIM"

func ipmiActivities(gate *BMCGate) *Activities {
	return &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverIPMI: ipmiFactory},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_SIM": ipmisim.User + ":" + ipmisim.Password}),
		BMCs:      gate,
	}
}

func powerOn(ctx context.Context, a *Activities, node, addr, driver, ref string) error {
	_, err := a.SetPower(ctx, kinds.SetPowerInput{Action: bmc.PowerOn,
		BMC: kinds.BMCTarget{NodeID: node, Address: addr, Driver: driver, CredentialsRef: ref}})
	return err
}

// manyNodes powers on n nodes behind the BMC at addr at once and returns
// each one's error.
func manyNodes(a *Activities, n int, addr, driver, ref string) []error {
	out := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out[i] = powerOn(ctx, a, fmt.Sprintf("node_%02d", i), addr, driver, ref)
		})
	}
	wg.Wait()
	return out
}

// TestBMCGateOneSessionIPMI: 20 nodes behind one ipmi_sim at once all get
// their power on, and the BMC never holds two sessions at once (each
// driver call holds exactly one session, opened and closed within it).
func TestBMCGateOneSessionIPMI(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{})
	var w watched
	a := ipmiActivities(NewBMCGate(BMCGateConfig{}))
	a.Drivers[bmc.DriverIPMI] = w.factory(ipmiFactory)
	for i, err := range manyNodes(a, 20, s.Address(), bmc.DriverIPMI, simCredsRef) {
		if err != nil {
			t.Errorf("node %d: power.setPower(on) = %v, want nil", i, err)
		}
	}
	if got := w.high.Load(); got != 1 {
		t.Errorf("sessions open at once at the BMC = %d, want 1", got)
	}
	if got := s.Read(t, "power"); got != "1" {
		t.Errorf("ipmi_sim power = %s, want 1", got)
	}
}

// TestBMCGateSessionLimitIPMI: while the BMC's session table is full for a
// second, a power action backs off on its "no resources" answers and
// succeeds once a session is free.
func TestBMCGateSessionLimitIPMI(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{})
	f := startIPMIFront(t, s.Port())
	f.full.Store(true)
	time.AfterFunc(time.Second, func() { f.full.Store(false) })
	a := ipmiActivities(NewBMCGate(BMCGateConfig{Backoff: 100 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := powerOn(ctx, a, "node_1", "ipmi://"+f.addr, bmc.DriverIPMI, simCredsRef); err != nil {
		t.Fatalf("power.setPower(on) while the session table is full for 1s = %v, want nil after backoff", err)
	}
	if f.refused.Load() < 2 || time.Since(start) < time.Second {
		t.Errorf("logins refused = %d, success after %v; want several refusals, then success after 1s", f.refused.Load(), time.Since(start))
	}
	if got := s.Read(t, "power"); got != "1" {
		t.Errorf("ipmi_sim power = %s, want 1", got)
	}
}

// ipmiFront forwards UDP between clients and an ipmi_sim. Full, it answers
// every Open Session Request itself with the RMCP+ status a BMC whose
// session table is full sends (01h, no resources); paused, it drops every
// packet: a BMC that stops answering.
type ipmiFront struct {
	addr         string
	paused, full atomic.Bool
	refused      atomic.Int32
}

const (
	rmcpPlusHeader = 16 // RMCP (4), auth type, payload type, session ID (4), sequence (4), length (2)
	ptOpenRequest  = 0x10
	ptOpenResponse = 0x11
)

func startIPMIFront(t testing.TB, upstream int) *ipmiFront {
	t.Helper()
	front, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &ipmiFront{addr: front.LocalAddr().String()}
	var mu sync.Mutex
	backs := map[string]net.Conn{} // one upstream socket per client: ipmi_sim keys sessions by it
	t.Cleanup(func() {
		front.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, b := range backs {
			b.Close()
		}
	})
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := front.ReadFrom(buf)
			if err != nil {
				return
			}
			if f.paused.Load() || f.refuse(front, from, buf[:n]) {
				continue
			}
			mu.Lock()
			back := backs[from.String()]
			if back == nil {
				if back, err = net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(upstream))); err != nil {
					mu.Unlock()
					continue
				}
				backs[from.String()] = back
				go f.answer(front, back, from)
			}
			mu.Unlock()
			_, _ = back.Write(buf[:n])
		}
	}()
	return f
}

// refuse answers an Open Session Request itself while the table is full.
func (f *ipmiFront) refuse(front net.PacketConn, from net.Addr, p []byte) bool {
	if !f.full.Load() || len(p) < rmcpPlusHeader+8 || p[4] != 0x06 || p[5]&0x3f != ptOpenRequest {
		return false
	}
	f.refused.Add(1)
	res := []byte{0x06, 0x00, 0xff, 0x07, 0x06, ptOpenResponse, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0,
		p[rmcpPlusHeader], 0x01, 0, 0} // message tag, status 01h: no resources to create a session
	_, _ = front.WriteTo(append(res, p[rmcpPlusHeader+4:rmcpPlusHeader+8]...), from)
	return true
}

// answer forwards the BMC's answers to client to.
func (f *ipmiFront) answer(front net.PacketConn, back net.Conn, to net.Addr) {
	buf := make([]byte, 2048)
	for {
		n, err := back.Read(buf)
		if err != nil {
			return
		}
		if !f.paused.Load() {
			_, _ = front.WriteTo(buf[:n], to)
		}
	}
}

// TestBMCGateBreakerIPMI: a BMC that stops answering opens the breaker
// after 3 failures; later calls fail in under 100 ms with DRIVER_ERROR
// naming the BMC, since when, and its last answer; once the BMC answers
// again, the probe after the cool-down closes it.
func TestBMCGateBreakerIPMI(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{})
	r := startIPMIFront(t, s.Port())
	const coolDown = 500 * time.Millisecond
	a := ipmiActivities(NewBMCGate(BMCGateConfig{Failures: 3, CoolDown: coolDown}))
	var impatient impatientIPMI
	a.Drivers[bmc.DriverIPMI] = impatient.factory
	addr := "ipmi://" + r.addr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := powerOn(ctx, a, "node_1", addr, bmc.DriverIPMI, simCredsRef); err != nil {
		t.Fatalf("power.setPower(on) through the relay = %v", err)
	}

	r.paused.Store(true)
	impatient.on.Store(true)
	fault := time.Now()
	for i := 1; i <= 3; i++ {
		err := powerOn(ctx, a, "node_1", addr, bmc.DriverIPMI, simCredsRef)
		if errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), "BMC "+r.addr+" unreachable since ") {
			t.Fatalf("call %d to a silent BMC = %v, want DRIVER_ERROR BMC %s unreachable since …", i, err, r.addr)
		}
	}
	start := time.Now()
	err := powerOn(ctx, a, "node_1", addr, bmc.DriverIPMI, simCredsRef)
	took := time.Since(start)
	want := fmt.Sprintf("BMC %s unreachable since %s: ", r.addr, stamp(fault))
	if stamp(fault) != stamp(start) && !strings.Contains(err.Error(), want) { // a second turned between
		want = fmt.Sprintf("BMC %s unreachable since %s: ", r.addr, stamp(fault.Add(time.Second)))
	}
	if errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("call with the breaker open = %v, want DRIVER_ERROR with %q and the BMC's last answer", err, want)
	}
	if took > 100*time.Millisecond {
		t.Errorf("call with the breaker open took %v, want < 100ms", took)
	}

	r.paused.Store(false)
	impatient.on.Store(false)
	time.Sleep(coolDown)
	for i := range 2 {
		if err := powerOn(ctx, a, "node_1", addr, bmc.DriverIPMI, simCredsRef); err != nil {
			t.Errorf("call %d after the BMC came back = %v, want nil", i, err)
		}
	}
}
