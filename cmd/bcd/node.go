package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/internal/logflag"
	"github.com/better-compute/better-compute/nodeagent"
)

// nodeCommand is `bcd node`, the agent of an installed OS.
func nodeCommand(flags ...cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "node",
		Usage: "run an installed machine's agent: joins once with the single-use provisioned token its installer wrote " +
			"(the file is removed after), keeps its node certificate in the data dir and renews it",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "control-plane", Usage: "the control plane's agents listener, https://host:7781 (joins and renewals)"},
			&cli.StringFlag{Name: "site", Usage: "the site agent's relay, https://host:8443: joins and renews through the site when the control plane is not reachable"},
			&cli.StringFlag{Name: "ca-file", Required: true, Usage: "the project CA certificate (pki/ca.crt)"},
			&cli.StringFlag{Name: "token-file", Value: "/etc/bcd/join-token", Usage: "the provisioned token (first start only)"},
			&cli.StringFlag{Name: "data-dir", Value: "/var/lib/bcd-node"},
			&cli.DurationFlag{Name: "renew-check-every", Value: time.Hour, Usage: "how often the certificate is checked for renewal"},
		}, flags...),
		Action: func(c *cli.Context) error {
			return nodeagent.Run(c.Context, nodeagent.Config{ControlPlaneURL: c.String("control-plane"), SiteURL: c.String("site"),
				CAFile: c.String("ca-file"), TokenFile: c.String("token-file"), DataDir: c.String("data-dir"),
				RenewCheckEvery: c.Duration("renew-check-every"), Logger: logflag.Logger(c)})
		},
	}
}
