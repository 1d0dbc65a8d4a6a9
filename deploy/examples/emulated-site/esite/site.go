package esite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent"
	"github.com/better-compute/better-compute/siteagent/pxe"
)

// site is the inner run: everything of ours, inside the site namespace.
type site struct {
	cfg      Config
	out      io.Writer
	log      *slog.Logger
	logFile  *os.File
	started  time.Time
	cp       *controlplane.ControlPlane
	agent    *siteagent.Agent
	api      *demo.Client
	siteID   string
	poolID   string
	trusted  string // the pool with trustProvisioningNetwork
	ipmiPool string // the pool of the built-in ipmi hardware profile
	machines []*machine
	images   *http.Server // the OS image store, with Config.Image
	mu       sync.Mutex   // serializes output lines
}

const hardwareConfig = `# Written by the emulated site.
hardwareProfiles:
  emulated-redfish:
    description: QEMU machines behind QMP-backed Redfish BMCs, PXE-booted by the site agent
    drivers: {power: redfish, management: redfish, boot: ipxe, deploy: image-stream}
`

// runSite starts the site, takes every machine to ready, and stops it all
// (QEMU, the site agent, the control plane and its Postgres) before it
// returns, also when SIGTERM or SIGINT ends it early.
func runSite(cfg Config, out io.Writer) Result {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := &site{cfg: cfg, out: out, started: time.Now()}
	defer s.close()
	if err := s.start(ctx); err != nil {
		return Result{Error: err.Error()}
	}
	res := Result{Machines: make([]MachineResult, len(s.machines))}
	var wg sync.WaitGroup
	for i, m := range s.machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Machines[i] = s.lifecycle(ctx, m)
		}()
	}
	wg.Wait()
	for _, r := range res.Machines {
		if r.Error != "" {
			res.Error = fmt.Sprintf("%s: %s", r.Name, r.Error)
		}
	}
	return res
}

func (s *site) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "[%6.1fs] %s\n", time.Since(s.started).Seconds(), fmt.Sprintf(format, args...))
}

// start starts the control plane, registers the site and its agent (with
// network boot on the bridge), a pool, and the machines with their BMCs.
func (s *site) start(ctx context.Context) error {
	var err error
	if err := s.openLog(); err != nil {
		return err
	}
	dataDir := filepath.Join(s.cfg.Dir, "control-plane")
	if err := prepareDataDir(dataDir); err != nil {
		return err
	}
	s.say("starting the control plane in %s", dataDir)
	s.cp, err = controlplane.Start(ctx, controlplane.Config{DataDir: dataDir, Listen: "127.0.0.1:0",
		TemporalListen: "127.0.0.1:0", UIListen: "off", AgentsListen: "127.0.0.1:0", Logger: s.log})
	if err != nil {
		return err
	}
	if s.api, err = demo.NewClient(s.cp.APIURL(), s.cp.RootTokenPath()); err != nil {
		return err
	}
	if err := s.startAgent(ctx); err != nil {
		return err
	}
	pool, err := s.api.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: s.siteID, Class: "metal-host",
		Policy: &v1.PoolPolicy{HardwareProfile: "emulated-redfish"}}))
	if err != nil {
		return fmt.Errorf("pools.create: %w", err)
	}
	s.poolID = pool.Msg.Pool.Id
	trusted, err := s.api.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: s.siteID, Class: "metal-host",
		Policy: &v1.PoolPolicy{HardwareProfile: "emulated-redfish", TrustProvisioningNetwork: true}}))
	if err != nil {
		return fmt.Errorf("pools.create(trustProvisioningNetwork): %w", err)
	}
	s.trusted = trusted.Msg.Pool.Id
	// A pool's hardware profile fixes its power driver: IPMI machines have
	// a pool of their own, of the built-in ipmi profile.
	ipmiPool, err := s.api.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: s.siteID, Class: "metal-host",
		Policy: &v1.PoolPolicy{HardwareProfile: "ipmi"}}))
	if err != nil {
		return fmt.Errorf("pools.create(ipmi): %w", err)
	}
	s.ipmiPool = ipmiPool.Msg.Pool.Id
	if s.cfg.Image != "" {
		if err := s.registerImage(ctx); err != nil {
			return err
		}
	}
	for i, spec := range s.cfg.Machines {
		m, err := s.newMachine(i, spec)
		if err != nil {
			return fmt.Errorf("machine %s: %w", spec.Name, err)
		}
		s.machines = append(s.machines, m)
	}
	return nil
}

// openLog sends every process's log to Dir/site.log (and to out, verbose).
func (s *site) openLog() error {
	f, err := os.Create(filepath.Join(s.cfg.Dir, "site.log"))
	if err != nil {
		return err
	}
	s.logFile = f
	var w io.Writer = f
	if s.cfg.Verbose {
		w = io.MultiWriter(f, s.out)
	}
	s.log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return nil
}

// prepareDataDir starts the control plane's data dir afresh: a CA (so
// ramdisks and the site agent can join) and the hardware profile.
func prepareDataDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := pki.Init(filepath.Join(dir, "pki"), "esite.better-compute.test"); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(hardwareConfig), 0o600)
}

// startAgent creates the site and starts its agent as `bcd site
// --pxe-interface br0 --ramdisk-dir …` would.
func (s *site) startAgent(ctx context.Context) error {
	st, err := s.api.Sites.Create(ctx, connect.NewRequest(&v1.CreateSiteRequest{Kind: "shared", Region: "lab-1", Key: "lab-1"}))
	if err != nil {
		return fmt.Errorf("sites.create: %w", err)
	}
	s.siteID = st.Msg.Site.Id
	tok, err := s.api.SiteTokens.Create(ctx, connect.NewRequest(&v1.CreateSiteTokenRequest{SiteId: s.siteID, TtlSeconds: 3600, Key: "lab-1-agent"}))
	if err != nil {
		return fmt.Errorf("site-tokens.create: %w", err)
	}
	tokenFile := filepath.Join(s.cfg.Dir, "site-token")
	if err := os.WriteFile(tokenFile, []byte(tok.Msg.Token+"\n"), 0o600); err != nil {
		return err
	}
	agentDir := filepath.Join(s.cfg.Dir, "site-agent")
	_ = os.RemoveAll(agentDir)
	s.agent, err = siteagent.Start(ctx, siteagent.Config{ControlPlaneURL: s.cp.AgentsURL(), CAFile: s.cp.CAFile(),
		TokenFile: tokenFile, DataDir: agentDir, BootListen: siteIP + ":8080", RelayListen: siteIP + ":8443",
		RamdiskDir: s.cfg.RamdiskDir, BootStall: s.cfg.BootStall, PXE: pxe.Config{Interface: bridge, ServerAddr: siteIP}, AdvertiseHost: siteIP,
		Drivers: demo.Drivers(), Logger: s.log.With("process", "site-agent")})
	if err != nil {
		return err
	}
	s.say("site %s: its agent serves proxy DHCP and TFTP on %s, HTTP boot at %s", s.siteID, bridge, s.agent.BootURL())
	return nil
}

// close stops the machines (QEMU killed by PID), the agent and the
// control plane, newest first.
func (s *site) close() {
	for _, m := range s.machines {
		m.close()
	}
	if s.images != nil {
		_ = s.images.Close()
	}
	if s.agent != nil {
		s.agent.Stop()
	}
	if s.cp != nil {
		s.cp.Stop()
	}
	if s.logFile != nil {
		s.logFile.Close()
	}
}
