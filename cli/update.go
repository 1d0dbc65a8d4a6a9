package cli

import (
	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
)

// updateCommand is `metal update NODE`: new BMC settings, checked against
// the BMC before they are saved.
func updateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "fix a node's BMC settings (address, credentials, TLS trust); the BMC is asked first and nothing changes unless it answers",
		ArgsUsage: "NODE",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "bmc-address", Usage: "new BMC address: host, host:port or a Redfish system URL"},
			&cli.StringFlag{Name: "bmc-driver", Usage: "redfish or ipmi, when it changes"},
			&cli.StringFlag{Name: "bmc-credentials", Usage: "secret://TENANT/NAME or env://VAR reference to the new BMC credentials"},
			&cli.StringFlag{Name: "bmc-username", Usage: "new BMC username, with --bmc-password-file"},
			&cli.StringFlag{Name: "bmc-password-file", Usage: "file holding the new BMC password (a trailing newline is dropped)"},
		}, bmcTLSFlags()...),
		Action: func(c *cli.Context) error {
			return send(c, "NODE", nil, bettercomputev1connect.MetalServiceUpdateProcedure, showNode, func(s *session) (proto.Message, error) {
				b := &v1.Bmc{Address: c.String("bmc-address"), Driver: c.String("bmc-driver")}
				if c.IsSet("bmc-credentials") || c.IsSet("bmc-username") || c.IsSet("bmc-password-file") {
					if err := bmcCredentials(c, b); err != nil {
						return nil, err
					}
				}
				if err := bmcTLS(c, b); err != nil {
					return nil, err
				}
				if proto.Equal(b, &v1.Bmc{}) {
					return nil, errs.Invalid("bmc-address", "give what to change: --bmc-address, --bmc-credentials, --bmc-username with --bmc-password-file, or the TLS flags")
				}
				return &v1.UpdateNodeRequest{Id: s.args[0], Bmc: b}, nil
			})
		},
	}
}
