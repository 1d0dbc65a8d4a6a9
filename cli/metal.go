package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
)

// maxPassword bounds a BMC password file: anything longer is not a password.
const maxPassword = 64 << 10

func metalCommand() *cli.Command {
	return &cli.Command{
		Name:  "metal",
		Usage: "enroll machines by their BMC and run the lifecycle verbs",
		Subcommands: []*cli.Command{
			enrollCommand(),
			updateCommand(),
			{Name: "get", Usage: "show a node", ArgsUsage: "NODE", Action: func(c *cli.Context) error {
				return send(c, "NODE", nil, bettercomputev1connect.MetalServiceGetProcedure, showNode, func(s *session) (proto.Message, error) {
					return &v1.GetNodeRequest{Id: s.args[0]}, nil
				})
			}},
			{Name: "list", Usage: "list nodes",
				Flags: []cli.Flag{&cli.StringFlag{Name: "pool", Usage: "only the nodes of this pool (pool_…)"}},
				Action: func(c *cli.Context) error {
					return send(c, "", nil, bettercomputev1connect.MetalServiceListProcedure, showNodes, func(*session) (proto.Message, error) {
						return &v1.ListNodesRequest{PoolId: c.String("pool")}, nil
					})
				}},
			{Name: "deploy", Usage: "write an OS to a ready node with a provision profile", ArgsUsage: "NODE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "profile", Usage: "provision profile id"},
					&cli.IntFlag{Name: "profile-version", Usage: "profile version"},
				},
				Action: metalDeploy},
			{Name: "undeploy", Usage: "take a deployed node back to ready: power down, wipe, attest", ArgsUsage: "NODE",
				Flags: []cli.Flag{&cli.StringFlag{Name: "wipe", Value: "quick", Usage: "quick, secure-erase, crypto-erase or none"}},
				Action: func(c *cli.Context) error {
					return send(c, "NODE", nil, bettercomputev1connect.MetalServiceUndeployProcedure, showVerb, func(s *session) (proto.Message, error) {
						return &v1.UndeployRequest{NodeId: s.args[0], Wipe: c.String("wipe")}, nil
					})
				}},
			{Name: "power", Usage: "power a node through its BMC", ArgsUsage: "NODE",
				Flags: []cli.Flag{&cli.StringFlag{Name: "action", Usage: "on, off, graceful-off, reset, graceful-restart, cycle or nmi"}},
				Action: func(c *cli.Context) error {
					return send(c, "NODE", []string{"action"}, bettercomputev1connect.MetalServicePowerProcedure, showVerb, func(s *session) (proto.Message, error) {
						return &v1.PowerRequest{NodeId: s.args[0], Action: c.String("action")}, nil
					})
				}},
			{Name: "abort", Usage: "stop the operation running on a node", ArgsUsage: "NODE",
				Flags: []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, for the record (required)"}},
				Action: func(c *cli.Context) error {
					return send(c, "NODE", []string{"reason"}, bettercomputev1connect.MetalServiceAbortProcedure, showVerb, func(s *session) (proto.Message, error) {
						return &v1.AbortRequest{NodeId: s.args[0], Reason: c.String("reason")}, nil
					})
				}},
			nodeVerb("manage", "hold a node for an operator: not deployable until provided", bettercomputev1connect.MetalServiceManageProcedure),
			nodeVerb("inspect", "read a node's inventory again", bettercomputev1connect.MetalServiceInspectProcedure),
			nodeVerb("provide", "clean a managed node and make it ready", bettercomputev1connect.MetalServiceProvideProcedure),
			nodeVerb("rescue", "boot a deployed node into the ramdisk as a rescue environment", bettercomputev1connect.MetalServiceRescueProcedure),
			nodeVerb("unrescue", "boot a rescued node back into its OS", bettercomputev1connect.MetalServiceUnrescueProcedure),
			nodeVerb("recover", "bring a failed node back (to cleaning or manageable)", bettercomputev1connect.MetalServiceRecoverProcedure),
			nodeVerb("retire", "crypto-erase, power off and revoke a node for good", bettercomputev1connect.MetalServiceRetireProcedure),
			waitCommand(),
			discoveredCommand(),
			confirmMacCommand(),
		},
	}
}

func commandsCommand() *cli.Command {
	return &cli.Command{
		Name:  "commands",
		Usage: "list what was sent to a node's site and ramdisk",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list a node's commands",
				Flags: []cli.Flag{&cli.StringFlag{Name: "node", Usage: "node id (node_…)"}},
				Action: func(c *cli.Context) error {
					return send(c, "", []string{"node"}, bettercomputev1connect.CommandsServiceListProcedure, showCommands,
						func(*session) (proto.Message, error) { return &v1.ListCommandsRequest{NodeId: c.String("node")}, nil })
				}},
		},
	}
}

// send runs a command that checks its argument (arg, "" for none) and flags, builds a request
// (which may fail before any call), sends it and shows the answer with show.
func send(c *cli.Context, arg string, flags []string, procedure string, show func(*session, []byte) error,
	build func(*session) (proto.Message, error)) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	var args []string
	if arg != "" {
		args = []string{arg}
	}
	if err := s.need(args...); err != nil {
		return err
	}
	if err := s.required(flags...); err != nil {
		return err
	}
	req, err := build(s)
	if err != nil {
		return err
	}
	raw, err := s.call(procedure, req)
	if err != nil {
		return err
	}
	return show(s, raw)
}

// nodeVerb is a verb that takes only the node.
func nodeVerb(name, usage, procedure string) *cli.Command {
	return &cli.Command{Name: name, Usage: usage, ArgsUsage: "NODE", Action: func(c *cli.Context) error {
		return send(c, "NODE", nil, procedure, showVerb, func(s *session) (proto.Message, error) {
			return &v1.NodeVerbRequest{NodeId: s.args[0]}, nil
		})
	}}
}

func metalDeploy(c *cli.Context) error {
	return send(c, "NODE", []string{"profile"}, bettercomputev1connect.MetalServiceDeployProcedure, showVerb,
		func(s *session) (proto.Message, error) {
			version := c.Int("profile-version")
			if version <= 0 {
				return nil, errs.Invalid("profile-version", "--profile-version is required and must be positive")
			}
			return &v1.DeployRequest{NodeId: s.args[0], Profile: c.String("profile"), ProfileVersion: int32(version)}, nil
		})
}

func enrollCommand() *cli.Command {
	return &cli.Command{
		Name:  "enroll",
		Usage: "enroll a machine by its BMC; credentials by reference, or a username with a password file (there is no password flag)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "site", Usage: "site id (site_…)"},
			&cli.StringFlag{Name: "pool", Usage: "pool id (pool_…)"},
			&cli.StringFlag{Name: "bmc-address", Usage: "BMC address: host, host:port or a Redfish system URL"},
			&cli.StringFlag{Name: "bmc-driver", Usage: "redfish or ipmi"},
			&cli.StringFlag{Name: "bmc-credentials", Usage: "secret://TENANT/NAME or env://VAR reference to the BMC credentials (vault:// is refused as UNSUPPORTED for now)"},
			&cli.StringFlag{Name: "bmc-username", Usage: "BMC username, with --bmc-password-file"},
			&cli.StringFlag{Name: "bmc-password-file", Usage: "file holding the BMC password (a trailing newline is dropped)"},
			&cli.StringFlag{Name: "macs", Usage: "the machine's MACs, comma-separated"},
			&cli.StringFlag{Name: "product-uuid", Usage: "the machine's SMBIOS product UUID"},
			&cli.StringFlag{Name: "addresses", Usage: "the machine's IP addresses, comma-separated"},
		}, bmcTLSFlags()...),
		Action: metalEnroll,
	}
}

func metalEnroll(c *cli.Context) error {
	flags := []string{"site", "pool", "bmc-address", "bmc-driver"}
	return send(c, "", flags, bettercomputev1connect.MetalServiceEnrollProcedure, showVerb, func(*session) (proto.Message, error) {
		driver := c.String("bmc-driver")
		if driver != "redfish" && driver != "ipmi" {
			return nil, errs.Invalid("bmc-driver", "--bmc-driver must be redfish or ipmi, not %q", driver)
		}
		bmc := &v1.Bmc{Address: c.String("bmc-address"), Driver: driver}
		if err := bmcCredentials(c, bmc); err != nil {
			return nil, err
		}
		if err := bmcTLS(c, bmc); err != nil {
			return nil, err
		}
		return &v1.EnrollRequest{
			SiteId: c.String("site"), PoolId: c.String("pool"), Bmc: bmc,
			Macs: splitList(c.String("macs")), ProductUuid: c.String("product-uuid"), Addresses: splitList(c.String("addresses")),
		}, nil
	})
}

// bmcCredentials sets the credentials of bmc from exactly one of
// --bmc-credentials and --bmc-username with --bmc-password-file. No message
// repeats a value: a password passed by mistake must not be printed.
func bmcCredentials(c *cli.Context, bmc *v1.Bmc) error {
	ref, user, file := c.String("bmc-credentials"), c.String("bmc-username"), c.String("bmc-password-file")
	both := "give either --bmc-credentials (a secret://, env:// or vault:// reference) or --bmc-username with --bmc-password-file"
	switch {
	case ref != "" && (user != "" || file != ""):
		return errs.Invalid("bmc-credentials", "%s, not both", both)
	case ref == "" && user == "":
		return errs.Invalid("bmc-credentials", "%s", both)
	case ref != "":
		for _, scheme := range []string{"secret://", "env://", "vault://"} {
			if strings.HasPrefix(ref, scheme) && len(ref) > len(scheme) {
				bmc.CredentialsRef = ref
				return nil
			}
		}
		return errs.Invalid("bmc-credentials", "--bmc-credentials must be a secret://, env:// or vault:// reference "+
			"(the value is not shown); for a plain password use --bmc-username with --bmc-password-file")
	case file == "":
		return errs.Invalid("bmc-password-file", "--bmc-username needs --bmc-password-file, a file holding the password")
	}
	password, err := readPassword(file)
	if err != nil {
		return err
	}
	bmc.Credentials = &v1.BmcCredentials{Username: user, Password: password}
	return nil
}

// readPassword reads a password file and drops its trailing newline.
func readPassword(path string) (string, error) {
	b, err := readSmallFile("bmc-password-file", path, maxPassword,
		fmt.Sprintf("larger than %d bytes; it should hold only the password", maxPassword))
	if err != nil {
		return "", err
	}
	password := strings.TrimRight(string(b), "\r\n")
	if password == "" {
		return "", errs.Invalid("bmc-password-file", "%s is empty; write the BMC password into it", path)
	}
	return password, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// nodeColumns are the columns of a node in a table.
func nodeColumns(more ...string) []string {
	return append([]string{"id", "poolId", "state", "failedFrom", "maintenance", "bmcDriver", "bmcAddress", "profileId", "profileVersion"}, more...)
}

func showVerb(s *session, raw []byte) error {
	return showColumns(s, raw, &v1.VerbResponse{}, "", []string{"node.id", "node.state", "workflowId"})
}

func showNode(s *session, raw []byte) error {
	return showColumns(s, raw, &v1.GetNodeResponse{}, "node", nodeColumns("progress", "lastError", "waitingFor", "macCandidate", "bmcTls.insecure", "bmcTls.spkiPin"))
}

func showNodes(s *session, raw []byte) error {
	return showColumns(s, raw, &v1.ListNodesResponse{}, "items", nodeColumns("progress"))
}

func showCommands(s *session, raw []byte) error {
	return showColumns(s, raw, &v1.ListCommandsResponse{}, "items",
		[]string{"kind", "runsOn", "step", "status", "attempt", "durationMs", "errorKind", "progress"})
}
