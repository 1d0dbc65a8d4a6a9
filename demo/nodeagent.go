package demo

import (
	"context"

	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/nodeagent"
)

// nodeAgent is an installed machine's bcd node, as its OS's unit starts
// it: it joins through the site's relay with the token its installer
// wrote (a machine on the provisioning network reaches only its site) and
// keeps its certificate in the installed OS's root.
func (d *Demo) nodeAgent(ctx context.Context, n emulate.InstalledNode) error {
	return nodeagent.Run(ctx, nodeagent.Config{SiteURL: d.Agent.RelayURL(), CAFile: d.CP.CAFile(),
		TokenFile: n.JoinTokenPath(), DataDir: n.NodeDataDir(), Logger: d.cfg.RackLogger.With("machine", n.Machine, "bcd", "node")})
}
