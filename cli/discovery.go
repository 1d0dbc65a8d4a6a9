package cli

import (
	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// discoveredCommand is `metal discovered --site S`: the MACs the site's
// agents saw PXE-booting without a boot entry.
func discoveredCommand() *cli.Command {
	return &cli.Command{Name: "discovered", Usage: "list the MACs a site's agents saw PXE-booting without a boot entry",
		Flags: []cli.Flag{&cli.StringFlag{Name: "site", Usage: "site id (site_…)"}},
		Action: func(c *cli.Context) error {
			return send(c, "", []string{"site"}, bettercomputev1connect.MetalServiceDiscoveredProcedure, showDiscovered,
				func(*session) (proto.Message, error) { return &v1.DiscoveredRequest{SiteId: c.String("site")}, nil })
		}}
}

// confirmMacCommand is `metal confirm-mac NODE --mac MAC`: binds a
// discovered MAC to a node that waits for one.
func confirmMacCommand() *cli.Command {
	return &cli.Command{Name: "confirm-mac", ArgsUsage: "NODE",
		Usage: "bind a MAC seen PXE-booting to a node enrolled without one that waits for a MAC confirmation",
		Flags: []cli.Flag{&cli.StringFlag{Name: "mac", Usage: "the MAC, as `metal discovered` lists it"}},
		Action: func(c *cli.Context) error {
			return send(c, "NODE", []string{"mac"}, bettercomputev1connect.MetalServiceConfirmMacProcedure, showConfirmed,
				func(s *session) (proto.Message, error) {
					return &v1.ConfirmMacRequest{NodeId: s.args[0], Mac: c.String("mac")}, nil
				})
		}}
}

func showDiscovered(s *session, raw []byte) error {
	return showColumns(s, raw, &v1.DiscoveredResponse{}, "items",
		[]string{"mac", "clientUuid", "arch", "firstSeen", "lastSeen", "count", "candidateFor", "nodeId"})
}

func showConfirmed(s *session, raw []byte) error {
	return showColumns(s, raw, &v1.ConfirmMacResponse{}, "node", []string{"id", "state", "macs"})
}
