package cli

import (
	"sort"
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	// The generated package registers the API's file descriptors, from which
	// the api command learns every service and method.
	_ "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
)

// apiPackage is the protobuf package of the API.
const apiPackage = "bettercompute.v1"

// Method is one unary API method as the api command names it.
type Method struct {
	Name      string // e.g. images.register
	Procedure string // e.g. /bettercompute.v1.ImagesService/Register
	Input     protoreflect.MessageDescriptor
}

// Methods lists the API's unary methods from the registered descriptors, so a
// new service is callable without a change here: the service is the
// lowerCamel of its name without "Service", the method the lowerCamel of the rpc.
func Methods() map[string]Method {
	out := map[string]Method{}
	protoregistry.GlobalFiles.RangeFilesByPackage(apiPackage, func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			svc := fd.Services().Get(i)
			group := lowerCamel(strings.TrimSuffix(string(svc.Name()), "Service"))
			for j := 0; j < svc.Methods().Len(); j++ {
				m := svc.Methods().Get(j)
				if m.IsStreamingClient() || m.IsStreamingServer() {
					continue
				}
				name := group + "." + lowerCamel(string(m.Name()))
				out[name] = Method{
					Name:      name,
					Procedure: "/" + string(svc.FullName()) + "/" + string(m.Name()),
					Input:     m.Input(),
				}
			}
		}
		return true
	})
	return out
}

// lowerCamel lowers the leading capitals: Sites → sites, SiteTokens →
// siteTokens, HTTPProxy → httpProxy.
func lowerCamel(s string) string {
	r := []rune(s)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n-- // the last capital starts the next word
	}
	for i := 0; i < n; i++ {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

// newMessage returns an empty message of type d: the generated type when it
// is linked in, a dynamic one otherwise.
func newMessage(d protoreflect.MessageDescriptor) proto.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName()); err == nil {
		return mt.New().Interface()
	}
	return dynamicpb.NewMessage(d)
}

func apiCommand() *cli.Command {
	return &cli.Command{
		Name:      "api",
		Usage:     "call any API method, e.g. api images.register --data @image.json",
		ArgsUsage: "SERVICE.METHOD",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Value: "{}",
				Usage: "request body: inline JSON, @file.json, or @- for stdin"},
		},
		Action: apiAction,
	}
}

func apiAction(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need("SERVICE.METHOD"); err != nil {
		return err
	}
	table := Methods()
	m, ok := table[s.args[0]]
	if !ok {
		names := make([]string, 0, len(table))
		for n := range table {
			names = append(names, n)
		}
		sort.Strings(names)
		return errs.Invalid("method", "unknown method %q; known methods: %s", s.args[0], strings.Join(names, ", "))
	}
	body, source, err := readData(c.String("data"), c.App.Reader)
	if err != nil {
		return err
	}
	req := newMessage(m.Input)
	if err := protojson.Unmarshal(body, req); err != nil {
		return errs.Invalid("data", "%s is not a valid %s: %v", source, m.Input.FullName(), err)
	}
	raw, err := s.call(m.Procedure, req)
	if err != nil {
		return err
	}
	return s.show(raw)
}
