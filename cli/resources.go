package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
)

func tenantsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tenants",
		Usage: "create and list tenants",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "create a tenant; prints its API token once", ArgsUsage: "ID",
				Action: func(c *cli.Context) error {
					return simple(c, []string{"ID"}, nil, bettercomputev1connect.TenantsServiceCreateProcedure,
						func(s *session) *v1.CreateTenantRequest { return &v1.CreateTenantRequest{Id: s.args[0]} })
				}},
			{Name: "list", Usage: "list tenants", Action: func(c *cli.Context) error {
				return simple(c, nil, nil, bettercomputev1connect.TenantsServiceListProcedure,
					func(*session) *v1.ListTenantsRequest { return &v1.ListTenantsRequest{} })
			}},
		},
	}
}

func sitesCommand() *cli.Command {
	return &cli.Command{
		Name:  "sites",
		Usage: "create, list and show sites",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "create a site (the same --key returns the same site)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "kind", Usage: "shared or dedicated"},
					&cli.StringFlag{Name: "region", Usage: "region name, e.g. lab-1"},
					&cli.StringFlag{Name: "key", Usage: "idempotency key"},
					&cli.BoolFlag{Name: "loopback-lab", Usage: "a lab whose agent runs on the control plane's host: its relay may be certified for 127.0.0.1, ::1 and localhost"},
				},
				Action: func(c *cli.Context) error {
					return simple(c, nil, []string{"kind", "region"}, bettercomputev1connect.SitesServiceCreateProcedure,
						func(s *session) *v1.CreateSiteRequest {
							return &v1.CreateSiteRequest{Kind: c.String("kind"), Region: c.String("region"), Key: c.String("key"),
								LoopbackLab: c.Bool("loopback-lab")}
						})
				}},
			{Name: "list", Usage: "list sites", Action: func(c *cli.Context) error {
				return simple(c, nil, nil, bettercomputev1connect.SitesServiceListProcedure,
					func(*session) *v1.ListSitesRequest { return &v1.ListSitesRequest{} })
			}},
			{Name: "get", Usage: "show a site", ArgsUsage: "ID", Action: func(c *cli.Context) error {
				return simple(c, []string{"ID"}, nil, bettercomputev1connect.SitesServiceGetProcedure,
					func(s *session) *v1.GetSiteRequest { return &v1.GetSiteRequest{Id: s.args[0]} })
			}},
		},
	}
}

// simple runs a command that checks its arguments and flags, sends one request
// and shows the answer.
func simple[R proto.Message](c *cli.Context, args, flags []string, procedure string, build func(*session) R) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need(args...); err != nil {
		return err
	}
	if err := s.required(flags...); err != nil {
		return err
	}
	raw, err := s.call(procedure, build(s))
	if err != nil {
		return err
	}
	return s.show(raw)
}

func siteTokensCommand() *cli.Command {
	return &cli.Command{
		Name:  "site-tokens",
		Usage: "issue single-use join tokens for site agents",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "issue a site token; --out writes it to a file (mode 0600) instead of printing it",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "site", Usage: "site id (site_…)"},
					&cli.StringFlag{Name: "ttl", Usage: "lifetime: seconds or a duration like 1h"},
					&cli.StringFlag{Name: "key", Usage: "idempotency key"},
					&cli.StringFlag{Name: "out", Usage: "file to write the token to, mode 0600"},
				},
				Action: siteTokensCreate},
		},
	}
}

func siteTokensCreate(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need(); err != nil {
		return err
	}
	if err := s.required("site", "ttl"); err != nil {
		return err
	}
	ttl, err := parseTTL(c.String("ttl"))
	if err != nil {
		return err
	}
	var out *secretFile
	if path := c.String("out"); path != "" {
		if out, err = openSecretFile(path); err != nil {
			return err
		}
		defer out.discard()
	}
	key := c.String("key")
	raw, err := s.call(bettercomputev1connect.SiteTokensServiceCreateProcedure,
		&v1.CreateSiteTokenRequest{SiteId: c.String("site"), TtlSeconds: ttl, Key: key})
	if err != nil {
		return err
	}
	var resp v1.CreateSiteTokenResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &resp); err != nil {
		return errs.Wrap(errs.Internal, err, "decode the site token answer")
	}
	if !resp.GetCreated() {
		return errs.New(errs.AlreadyExists,
			"the site token for key %q (%s) was already issued and its secret cannot be shown again; "+
				"use the saved copy, or issue a new token with another --key", key, resp.GetSiteToken().GetId())
	}
	if resp.GetToken() == "" {
		return errs.New(errs.Internal, "the server created site token %s but sent no secret", resp.GetSiteToken().GetId())
	}
	if out == nil {
		fmt.Fprintln(s.stderr, "note: this is the only time the site token is shown; save it now (or use --out FILE)")
		return s.show(raw)
	}
	if err := out.commit(resp.GetToken()); err != nil {
		return err
	}
	resp.Token = ""
	shown, err := protojson.Marshal(&resp)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode the site token record")
	}
	fmt.Fprintf(s.stderr, "wrote the site token to %s (mode 0600)\n", out.path)
	return s.show(shown)
}

// parseTTL reads whole seconds ("3600") or a Go duration ("1h").
func parseTTL(v string) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0, errs.Invalid("ttl", "--ttl must be positive, not %d", n)
		}
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d%time.Second != 0 {
		return 0, errs.Invalid("ttl", "--ttl %q is neither whole seconds nor a duration like 1h", v)
	}
	return int64(d / time.Second), nil
}

// secretFile is a token file written atomically with mode 0600: the
// temporary file is made before the call, so a token is never issued that
// cannot be saved.
type secretFile struct {
	path string
	tmp  *os.File
}

func openSecretFile(path string) (*secretFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, errs.Invalid("out", "cannot write next to %s: %v", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, errs.Invalid("out", "cannot make %s private: %v", tmp.Name(), err)
	}
	return &secretFile{path: path, tmp: tmp}, nil
}

func (f *secretFile) commit(secret string) error {
	if _, err := f.tmp.WriteString(secret); err != nil {
		return errs.Wrap(errs.Internal, err, "write the token to %s", f.tmp.Name())
	}
	if err := f.tmp.Close(); err != nil {
		return errs.Wrap(errs.Internal, err, "write the token to %s", f.tmp.Name())
	}
	if err := os.Rename(f.tmp.Name(), f.path); err != nil {
		return errs.Wrap(errs.Internal, err, "move the token into %s", f.path)
	}
	f.tmp = nil
	return nil
}

// discard removes the temporary file when commit did not happen.
func (f *secretFile) discard() {
	if f.tmp != nil {
		f.tmp.Close()
		os.Remove(f.tmp.Name())
	}
}
