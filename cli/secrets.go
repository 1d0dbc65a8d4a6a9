package cli

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
)

// maxSecret bounds a secret read from a file: credentials, not documents.
const maxSecret = 64 << 10

func secretsCommand() *cli.Command {
	return &cli.Command{
		Name:  "secrets",
		Usage: "keep the tenant's named secrets (BMC credentials), referenced as secret://TENANT/NAME",
		Subcommands: []*cli.Command{
			{Name: "put", ArgsUsage: "NAME",
				Usage: "seal username:password (or a JSON object with username and password) under NAME; " +
					"an existing NAME gets the new value, which its nodes use from their next BMC call",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "from-file", Usage: "file holding the value (a trailing newline is dropped)"},
					&cli.StringFlag{Name: "from-env", Usage: "environment variable holding the value"},
				},
				Action: secretsPut},
			{Name: "list", Usage: "list the tenant's secrets: names and times, never values", Action: func(c *cli.Context) error {
				s, err := begin(c)
				if err != nil {
					return err
				}
				if err := s.need(); err != nil {
					return err
				}
				raw, err := s.call(bettercomputev1connect.TenantSecretsServiceListProcedure, &v1.ListSecretsRequest{})
				if err != nil {
					return err
				}
				return showColumns(s, raw, &v1.ListSecretsResponse{}, "items", []string{"name", "ref", "createdAt", "updatedAt"})
			}},
			{Name: "delete", Usage: "delete a secret no live node uses", ArgsUsage: "NAME", Action: func(c *cli.Context) error {
				return simple(c, []string{"NAME"}, nil, bettercomputev1connect.TenantSecretsServiceDeleteProcedure,
					func(s *session) *v1.DeleteSecretRequest { return &v1.DeleteSecretRequest{Name: s.args[0]} })
			}},
		},
	}
}

// secretsPut sends the value from exactly one of --from-file and
// --from-env. No message repeats the value.
func secretsPut(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need("NAME"); err != nil {
		return err
	}
	value, err := secretValue(c.String("from-file"), c.String("from-env"))
	if err != nil {
		return err
	}
	raw, err := s.call(bettercomputev1connect.TenantSecretsServicePutProcedure, &v1.PutSecretRequest{Name: s.args[0], Value: value})
	if err != nil {
		return err
	}
	var resp v1.PutSecretResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &resp); err != nil {
		return errs.Wrap(errs.Internal, err, "decode the secrets.put answer")
	}
	if resp.GetReplaced() {
		fmt.Fprintf(s.stderr, "note: replaced the value of %s\n", resp.GetSecret().GetRef())
	}
	return s.show(raw)
}

func secretValue(file, env string) ([]byte, error) {
	switch {
	case file != "" && env != "":
		return nil, errs.Invalid("from-file", "give --from-file or --from-env, not both")
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return nil, errs.Invalid("from-env", "environment variable %s is not set or empty", env)
		}
		return []byte(v), nil
	case file == "":
		return nil, errs.Invalid("from-file", "give the value with --from-file F or --from-env VAR (there is no value flag)")
	}
	return readSmallFile("from-file", file, maxSecret,
		fmt.Sprintf("larger than %d KiB; it should hold only the credentials", maxSecret>>10))
}
