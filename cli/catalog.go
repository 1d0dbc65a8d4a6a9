package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
)

func poolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "pools",
		Usage: "create, list and show pools",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "create a pool of machines on a site",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "site", Usage: "site id (site_…)"},
					&cli.StringFlag{Name: "class", Usage: "machine class, e.g. metal-host"},
					&cli.StringFlag{Name: "agent", Usage: "bcd, or none for machines that never run bcd"},
					&cli.StringFlag{Name: "policy-file", Usage: "JSON policy: hardwareProfile, trustProvisioningNetwork, allowUnverifiedRelease, provisioningCidrs"},
				},
				Action: poolsCreate},
			{Name: "list", Usage: "list pools",
				Flags: []cli.Flag{&cli.StringFlag{Name: "site", Usage: "only the pools of this site"}},
				Action: func(c *cli.Context) error {
					return simple(c, nil, nil, bettercomputev1connect.PoolsServiceListProcedure,
						func(*session) *v1.ListPoolsRequest { return &v1.ListPoolsRequest{SiteId: c.String("site")} })
				}},
			{Name: "get", Usage: "show a pool", ArgsUsage: "ID", Action: func(c *cli.Context) error {
				return simple(c, []string{"ID"}, nil, bettercomputev1connect.PoolsServiceGetProcedure,
					func(s *session) *v1.GetPoolRequest { return &v1.GetPoolRequest{Id: s.args[0]} })
			}},
		},
	}
}

func poolsCreate(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need(); err != nil {
		return err
	}
	if err := s.required("site", "class"); err != nil {
		return err
	}
	agent := c.String("agent")
	if agent != "" && agent != "bcd" && agent != "none" {
		return errs.Invalid("agent", "--agent must be bcd or none, not %q", agent)
	}
	req := &v1.CreatePoolRequest{SiteId: c.String("site"), Class: c.String("class"), Agent: agent}
	if path := c.String("policy-file"); path != "" {
		req.Policy = &v1.PoolPolicy{}
		if err := readProtoFile("policy-file", path, req.Policy); err != nil {
			return err
		}
	}
	raw, err := s.call(bettercomputev1connect.PoolsServiceCreateProcedure, req)
	if err != nil {
		return err
	}
	return s.show(raw)
}

func imagesCommand() *cli.Command {
	return &cli.Command{
		Name:  "images",
		Usage: "register, list and show OS images in the catalog",
		Subcommands: []*cli.Command{
			{Name: "register", Usage: "add an image to the catalog",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Usage: "image name"},
					&cli.StringFlag{Name: "source", Usage: "http or https URL the site cache fetches"},
					&cli.StringFlag{Name: "digest", Usage: "sha256:<64 hex> of the file as served"},
					&cli.StringFlag{Name: "format", Usage: "raw or iso"},
					&cli.StringFlag{Name: "compression", Usage: "none, gzip, zstd or xz"},
					&cli.Int64Flag{Name: "size", Usage: "bytes of the file as served"},
				},
				Action: func(c *cli.Context) error {
					return simple(c, nil, []string{"name", "source", "digest", "format"}, bettercomputev1connect.ImagesServiceRegisterProcedure,
						func(*session) *v1.RegisterImageRequest {
							return &v1.RegisterImageRequest{
								Name: c.String("name"), Source: c.String("source"), Digest: c.String("digest"),
								Format: c.String("format"), Compression: c.String("compression"), Size: c.Int64("size"),
							}
						})
				}},
			{Name: "list", Usage: "list images", Action: func(c *cli.Context) error {
				return simple(c, nil, nil, bettercomputev1connect.ImagesServiceListProcedure,
					func(*session) *v1.ListImagesRequest { return &v1.ListImagesRequest{} })
			}},
			{Name: "get", Usage: "show an image", ArgsUsage: "ID", Action: func(c *cli.Context) error {
				return simple(c, []string{"ID"}, nil, bettercomputev1connect.ImagesServiceGetProcedure,
					func(s *session) *v1.GetImageRequest { return &v1.GetImageRequest{Id: s.args[0]} })
			}},
		},
	}
}

func hardwareProfilesCommand() *cli.Command {
	return &cli.Command{
		Name:  "hardware-profiles",
		Usage: "list the hardware profiles of the control plane's configuration",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list hardware profiles", Action: func(c *cli.Context) error {
				return simple(c, nil, nil, bettercomputev1connect.HardwareProfilesServiceListProcedure,
					func(*session) *v1.ListHardwareProfilesRequest { return &v1.ListHardwareProfilesRequest{} })
			}},
		},
	}
}

func workflowsCommand() *cli.Command {
	return &cli.Command{
		Name:  "workflows",
		Usage: "follow the workflows a verb started",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list a node's workflows",
				Flags: []cli.Flag{&cli.StringFlag{Name: "node", Usage: "node id (node_…)"}},
				Action: func(c *cli.Context) error {
					return simple(c, nil, []string{"node"}, bettercomputev1connect.WorkflowsServiceListProcedure,
						func(*session) *v1.ListWorkflowsRequest { return &v1.ListWorkflowsRequest{NodeId: c.String("node")} })
				}},
			{Name: "get", Usage: "show a workflow run", ArgsUsage: "WORKFLOW_ID",
				Flags: []cli.Flag{&cli.StringFlag{Name: "run-id", Usage: "a run of the workflow (default: the newest)"}},
				Action: func(c *cli.Context) error {
					return simple(c, []string{"WORKFLOW_ID"}, nil, bettercomputev1connect.WorkflowsServiceGetProcedure,
						func(s *session) *v1.GetWorkflowRequest {
							return &v1.GetWorkflowRequest{WorkflowId: s.args[0], RunId: c.String("run-id")}
						})
				}},
			{Name: "retry", Usage: "run a failed or stuck workflow again from a step; the steps before it are not run again",
				ArgsUsage: "WORKFLOW_ID",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "from-step", Usage: "the step to run again: its id (03.power.setPower) or its kind"},
					&cli.BoolFlag{Name: "force", Usage: "run again steps that are not retry-safe"},
					&cli.StringFlag{Name: "run-id", Usage: "the run to retry (default: the newest)"},
				},
				Action: func(c *cli.Context) error {
					return simple(c, []string{"WORKFLOW_ID"}, []string{"from-step"}, bettercomputev1connect.WorkflowsServiceRetryProcedure,
						func(s *session) *v1.RetryWorkflowRequest {
							return &v1.RetryWorkflowRequest{WorkflowId: s.args[0], RunId: c.String("run-id"),
								FromStep: c.String("from-step"), Force: c.Bool("force")}
						})
				}},
		},
	}
}

func profilesCommand() *cli.Command {
	version := func(usage string) cli.Flag { return &cli.IntFlag{Name: "profile-version", Usage: usage} }
	return &cli.Command{
		Name:  "profiles",
		Usage: "create, show, validate, render, share and delete provision profiles",
		Subcommands: append([]*cli.Command{
			{Name: "create", Usage: "create a profile version from a JSON document", ArgsUsage: "FILE", Action: profilesCreate},
			{Name: "get", Usage: "show a profile", ArgsUsage: "ID", Flags: []cli.Flag{version("version (default: the newest)")},
				Action: func(c *cli.Context) error {
					return simple(c, []string{"ID"}, nil, bettercomputev1connect.ProfilesServiceGetProcedure,
						func(s *session) *v1.GetProfileRequest {
							return &v1.GetProfileRequest{Id: s.args[0], Version: int32(c.Int("profile-version"))}
						})
				}},
			{Name: "list", Usage: "list profiles", Action: func(c *cli.Context) error {
				return simple(c, nil, nil, bettercomputev1connect.ProfilesServiceListProcedure,
					func(*session) *v1.ListProfilesRequest { return &v1.ListProfilesRequest{} })
			}},
			{Name: "validate", Usage: "check that every step of a profile version resolves; exit 1 when not",
				ArgsUsage: "ID", Flags: []cli.Flag{version("version to validate")}, Action: profilesValidate},
		}, profilesManageCommands()...),
	}
}

func profilesCreate(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need("FILE"); err != nil {
		return err
	}
	var p v1.Profile
	if err := readProtoFile("file", s.args[0], &p); err != nil {
		return err
	}
	raw, err := s.call(bettercomputev1connect.ProfilesServiceCreateProcedure, &v1.CreateProfileRequest{Profile: &p})
	if err != nil {
		return err
	}
	return s.show(raw)
}

func profilesValidate(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need("ID"); err != nil {
		return err
	}
	version := c.Int("profile-version")
	if version <= 0 {
		return errs.Invalid("profile-version", "--profile-version is required and must be positive")
	}
	id := s.args[0]
	raw, err := s.call(bettercomputev1connect.ProfilesServiceValidateProcedure,
		&v1.ValidateProfileRequest{Id: id, ProfileVersion: int32(version)})
	if err != nil {
		return err
	}
	var resp v1.ValidateProfileResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &resp); err != nil {
		return errs.Wrap(errs.Internal, err, "decode the validation answer")
	}
	if s.out.format == "json" || s.out.query != nil {
		err = s.show(raw)
	} else if resp.GetValid() {
		_, err = fmt.Fprintf(s.stdout, "profile %s version %d is valid\n", id, version)
	} else {
		err = s.show(raw)
	}
	if err != nil || resp.GetValid() {
		return err
	}
	return &exitError{code: 1, msg: fmt.Sprintf("profile %s version %d is not valid: %d problem(s)", id, version, len(resp.GetProblems()))}
}
