package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
)

// maxCAFile bounds --bmc-ca-file: a few certificates, never a trust store.
const maxCAFile = 64 << 10

// bmcTLSFlags are enroll's flags for how a Redfish BMC's HTTPS certificate
// is trusted; without any, it is verified against the site agent's roots.
func bmcTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "bmc-ca-file", Usage: "PEM file of the CA that signed the BMC's certificate (a self-signed BMC: its own certificate)"},
		&cli.StringFlag{Name: "bmc-tls-pin", Usage: "base64 SHA-256 of the BMC certificate's public key (SPKI); the BMC is trusted by its key alone"},
		&cli.BoolFlag{Name: "bmc-insecure", Usage: "accept any certificate from this BMC (labs only; the node shows it)"},
	}
}

// bmcTLS sets b.Tls from the flags; the API checks the values.
func bmcTLS(c *cli.Context, b *v1.Bmc) error {
	t := &v1.BmcTls{SpkiPin: c.String("bmc-tls-pin"), Insecure: c.Bool("bmc-insecure")}
	if path := c.String("bmc-ca-file"); path != "" {
		pem, err := readCAFile(path)
		if err != nil {
			return err
		}
		t.CaPem = pem
	}
	if t.CaPem != "" || t.SpkiPin != "" || t.Insecure {
		b.Tls = t
	}
	return nil
}

func readCAFile(path string) (string, error) {
	b, err := readSmallFile("bmc-ca-file", path, maxCAFile,
		fmt.Sprintf("larger than %d bytes; give only the BMC's CA certificates", maxCAFile))
	return string(b), err
}
