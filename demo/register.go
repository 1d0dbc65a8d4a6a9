package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi"
	"github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/siteagent"
)

// DemoProfile is the deploy profile the demo registers.
const DemoProfile = "demo-os"

// register does what an operator does before enrolling: a site, a site
// agent joined with a single-use site token, a pool, an image and a deploy
// profile; then it starts the emulated rack. The site is a loopback lab:
// its relay listens on 127.0.0.1 beside the control plane.
func (d *Demo) register(ctx context.Context) error {
	site, err := d.API.Sites.Create(ctx, connect.NewRequest(&v1.CreateSiteRequest{Kind: "shared", Region: "demo-1", Key: "demo-1",
		LoopbackLab: true}))
	if err != nil {
		return fmt.Errorf("sites.create: %w", err)
	}
	d.SiteID = site.Msg.Site.Id
	tok, err := d.API.SiteTokens.Create(ctx, connect.NewRequest(&v1.CreateSiteTokenRequest{SiteId: d.SiteID, TtlSeconds: 3600, Key: "demo-1-agent"}))
	if err != nil {
		return fmt.Errorf("site-tokens.create: %w", err)
	}
	tokenFile := filepath.Join(d.cfg.DataDir, "site-token")
	if err := os.WriteFile(tokenFile, []byte(tok.Msg.Token+"\n"), 0o600); err != nil {
		return err
	}
	d.say("site %s created; starting its site agent", d.SiteID)
	d.Agent, err = siteagent.Start(ctx, siteagent.Config{ControlPlaneURL: d.CP.AgentsURL(), CAFile: d.CP.CAFile(),
		TokenFile: tokenFile, DataDir: filepath.Join(d.cfg.DataDir, "site-agent"), BootListen: "127.0.0.1:0",
		RelayListen: "127.0.0.1:0", Drivers: Drivers(), BootStall: d.cfg.BootStall, Logger: d.cfg.SiteLogger, Tracer: d.cfg.Tracer})
	if err != nil {
		return err
	}
	pool, err := d.API.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: d.SiteID, Class: "metal-host",
		Policy: &v1.PoolPolicy{HardwareProfile: "emulated-redfish"}}))
	if err != nil {
		return fmt.Errorf("pools.create: %w", err)
	}
	d.PoolID = pool.Msg.Pool.Id
	if d.cfg.IPMI > 0 {
		ipmiPool, err := d.API.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: d.SiteID, Class: "metal-host",
			Policy: &v1.PoolPolicy{HardwareProfile: "emulated-ipmi"}}))
		if err != nil {
			return fmt.Errorf("pools.create(emulated-ipmi): %w", err)
		}
		d.IPMIPoolID = ipmiPool.Msg.Pool.Id
	}
	if d.Image, err = NewImageServer(d.cfg.ImageSize); err != nil {
		return err
	}
	if d.ImageID, err = d.API.ImageProfile(ctx, DemoProfile, &v1.RegisterImageRequest{Name: "demo-os", Source: d.Image.URL,
		Digest: d.Image.Digest, Format: "raw", Compression: "zstd", Size: d.Image.Size}, nil); err != nil {
		return err
	}
	d.Profile = DemoProfile
	d.say("pool %s, image %s (%d MiB, zstd %d KiB), profile %s v1 registered", d.PoolID, d.ImageID,
		d.Image.Raw>>20, d.Image.Size>>10, DemoProfile)
	if len(d.cfg.RackCommand) > 0 {
		if d.rackProc, err = d.startRackProcess(d.Agent.BootURL()); err != nil {
			return err
		}
		d.say("emulated rack of %d machines started in process %d (%d with Redfish BMCs, %d with IPMI BMCs)", d.cfg.Machines,
			d.rackProc.cmd.Process.Pid, d.cfg.Machines-d.cfg.IPMI, d.cfg.IPMI)
		return nil
	}
	d.Rack, err = emulate.Start(ctx, emulate.Config{Machines: d.cfg.Machines, IPMI: d.cfg.IPMI, Dir: filepath.Join(d.cfg.DataDir, "rack"),
		BootURL: d.Agent.BootURL(), Username: "admin", Password: d.cfg.BMCPassword, Logger: d.cfg.RackLogger,
		BMCLogger: d.cfg.BMCLogger, RamdiskLogger: d.cfg.RamdiskLogger, RamdiskTracer: d.cfg.Tracer, NodeAgent: d.nodeAgent})
	if err != nil {
		return err
	}
	d.say("emulated rack of %d machines started (%d with Redfish BMCs, %d with IPMI BMCs)", d.cfg.Machines,
		d.cfg.Machines-d.cfg.IPMI, d.cfg.IPMI)
	return nil
}

// rackPassword is the emulated BMCs' password unless Config says otherwise.
const rackPassword = "demo-bmc-password"

// Drivers is the BMC driver registry of the demo's site agent.
func Drivers() map[string]siteagent.DriverFactory {
	return map[string]siteagent.DriverFactory{
		bmc.DriverRedfish: func(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
			return redfish.New(redfish.Config{Address: addr, Credentials: creds})
		},
		bmc.DriverIPMI: func(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
			return ipmi.New(ipmi.Config{Address: addr, Credentials: creds})
		},
	}
}
