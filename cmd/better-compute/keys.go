package main

import (
	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/internal/logflag"
)

func keyTransitFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "key-transit", Usage: "a Vault/OpenBao transit key instead of --key-file: not supported yet (UNSUPPORTED)"}
}

func keyFileFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "key-file", EnvVars: []string{"BETTER_COMPUTE_KEY_FILE"},
		Usage: "the key file that wraps the secrets and payload keys (default: <data-dir>/" + controlplane.KeyFile + "; every serve over one database needs the same)"}
}

// tlsFlags are serve's TLS options for the API.
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		keyFileFlag(),
		keyTransitFlag(),
		&cli.StringFlag{Name: "tls-cert", Usage: "serve the API over TLS with this PEM certificate chain (with --tls-key)"},
		&cli.StringFlag{Name: "tls-key", Usage: "the PEM private key of --tls-cert"},
	}
}

func keysCommand() *cli.Command {
	return &cli.Command{
		Name:  "keys",
		Usage: "the keys that seal secrets and encrypt workflow payloads",
		Subcommands: []*cli.Command{{
			Name: "rotate",
			Usage: "add new keys, re-seal every secret under the new secrets key and retire the old one; " +
				"run it beside serve (no downtime), with serve's data dir or --database-url and its key file",
			Flags: []cli.Flag{
				dataDirFlag(),
				&cli.StringFlag{Name: "database-url", EnvVars: []string{"BETTER_COMPUTE_DATABASE_URL"}, Usage: "external PostgreSQL (default: the private cluster in the data dir)"},
				keyFileFlag(),
				keyTransitFlag(),
				&cli.StringFlag{Name: "log-level", Value: "warn"},
				logflag.Format(),
			},
			Action: func(c *cli.Context) error {
				return controlplane.RotateKeys(c.Context, controlplane.Config{DataDir: c.String("data-dir"),
					DatabaseURL: c.String("database-url"), KeyFile: c.String("key-file"), KeyTransit: c.String("key-transit"), Logger: logflag.Logger(c)}, c.App.Writer)
			},
		}},
	}
}
