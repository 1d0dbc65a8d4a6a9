package cli

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/errs"
)

// errHelpShown ends a command whose help was asked for after its arguments.
var errHelpShown = errors.New("help shown")

// session is what one command needs: its positional arguments, the client,
// the output options and where to write.
type session struct {
	c      *cli.Context
	args   []string
	client *Client
	out    output
	tenant string
	stdout io.Writer
	stderr io.Writer
}

// begin parses what urfave/cli left (flags after positional arguments), checks
// the output options and builds the client. It makes no call.
func begin(c *cli.Context) (*session, error) {
	args, err := interspersed(c)
	if err != nil {
		return nil, err
	}
	out, err := outputOf(c)
	if err != nil {
		return nil, err
	}
	tenant := c.String("tenant")
	hc, err := httpClient(c.String("ca-file"))
	if err != nil {
		return nil, err
	}
	return &session{
		c:      c,
		args:   args,
		out:    out,
		tenant: tenant,
		stdout: c.App.Writer,
		stderr: c.App.ErrWriter,
		client: &Client{
			BaseURL: c.String("url"),
			Token:   tokenSource(c.String("token"), c.String("data-dir")),
			Tenant:  tenant,
			HTTP:    hc,
		},
	}, nil
}

// call fills tenantId when the request has one and a tenant is set, sends the
// request and returns the raw answer.
func (s *session) call(procedure string, req proto.Message) ([]byte, error) {
	setTenant(req, s.tenant)
	return s.client.Call(s.c.Context, procedure, req)
}

// show prints an answer as -o and --query ask.
func (s *session) show(raw []byte) error { return s.out.render(s.stdout, raw) }

// need checks that exactly the named positional arguments were given.
func (s *session) need(names ...string) error {
	if len(s.args) == len(names) {
		return nil
	}
	usage := s.c.Command.HelpName + " " + strings.Join(names, " ")
	if len(s.args) < len(names) {
		return errs.Invalid(strings.ToLower(names[len(s.args)]), "missing %s; usage: %s", names[len(s.args)], usage)
	}
	return errs.Invalid("", "unexpected argument %q; usage: %s", s.args[len(names)], usage)
}

// required checks that each named flag has a value.
func (s *session) required(names ...string) error {
	for _, n := range names {
		if s.c.String(n) == "" {
			return errs.Invalid(n, "--%s is required (see %s --help)", n, s.c.Command.HelpName)
		}
	}
	return nil
}

// setTenant sets a string tenant_id field of m when it is empty.
func setTenant(m proto.Message, tenant string) {
	if tenant == "" || m == nil {
		return
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("tenant_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() || r.Get(fd).String() != "" {
		return
	}
	r.Set(fd, protoreflect.ValueOfString(tenant))
}

// tokenSource returns the bearer token: the flag or environment, else the
// root-token file the control plane writes into its data directory.
func tokenSource(token, dataDir string) func() (string, error) {
	return func() (string, error) {
		if token != "" {
			return token, nil
		}
		path := filepath.Join(dataDir, "root-token")
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", errs.New(errs.Unauthenticated,
				"no API token: set BETTER_COMPUTE_TOKEN (or --token), or set BETTER_COMPUTE_DATA_DIR (or --data-dir) "+
					"to the control plane's data directory that holds root-token (%s does not exist)", path)
		case err != nil:
			return "", errs.Wrap(errs.Unauthenticated, err, "read the API token from %s", path)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", errs.New(errs.Unauthenticated, "%s is empty: set BETTER_COMPUTE_TOKEN (or --token)", path)
		}
		return t, nil
	}
}

// interspersed sets the flags that follow positional arguments (urfave/cli v2
// stops at the first one, the spec writes `profiles validate ID --profile-version 1`)
// and returns the positional arguments. "--" ends the flags.
func interspersed(c *cli.Context) ([]string, error) {
	rest := c.Args().Slice()
	var pos []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			return append(pos, rest[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "h" || name == "help" {
			_ = cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
			return nil, errHelpShown
		}
		f := findFlag(c, name)
		if f == nil {
			return nil, errs.Invalid(name, "flag provided but not defined: %s (see %s --help)", a, c.Command.HelpName)
		}
		if tv, ok := f.(interface{ TakesValue() bool }); ok && !tv.TakesValue() {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(rest) {
				return nil, errs.Invalid(name, "flag needs an argument: %s", a)
			}
			i++
			value = rest[i]
		}
		for _, n := range f.Names() {
			if err := c.Set(n, value); err != nil {
				return nil, errs.Invalid(name, "invalid value %q for %s: %v", value, a, err)
			}
		}
	}
	return pos, nil
}

func findFlag(c *cli.Context, name string) cli.Flag {
	if f := flagNamed(c.Command.Flags, name); f != nil {
		return f
	}
	return flagNamed(c.App.Flags, name)
}

// flagNamed is the flag of flags that name is one of the names of, or nil.
func flagNamed(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "url", EnvVars: []string{"BETTER_COMPUTE_URL"}, Value: defaultURL,
			Usage: "base URL of the control plane's API"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"BETTER_COMPUTE_TOKEN"},
			Usage: "API token (default: root-token in --data-dir)"},
		&cli.StringFlag{Name: "ca-file", EnvVars: []string{"BETTER_COMPUTE_CA_FILE"},
			Usage: "CA certificates (PEM) that verify an https --url (default: the system roots)"},
		&cli.StringFlag{Name: "tenant", EnvVars: []string{"BETTER_COMPUTE_TENANT"},
			Usage: "tenant to act in (default: the token's own tenant)"},
		&cli.StringFlag{Name: "data-dir", EnvVars: []string{"BETTER_COMPUTE_DATA_DIR"}, Value: defaultDataDir,
			Usage: "control plane data directory, read for root-token when no token is given"},
	}
}

func outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "json or table"},
		&cli.StringFlag{Name: "query", Usage: "JMESPath expression over the JSON answer, e.g. \"items[].id\""},
	}
}
