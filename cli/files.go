package cli

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/errs"
)

// maxInput bounds a request document read from a file or stdin.
const maxInput = 16 << 20

// readData reads --data: inline JSON, @file or @- (stdin). It returns the
// bytes and a name for them in messages.
func readData(spec string, stdin io.Reader) ([]byte, string, error) {
	switch {
	case spec == "@-":
		if stdin == nil {
			stdin = os.Stdin
		}
		b, err := io.ReadAll(io.LimitReader(stdin, maxInput))
		if err != nil {
			return nil, "", errs.Invalid("data", "read the request from stdin: %v", err)
		}
		return b, "stdin", checkJSON("data", "stdin", b)
	case strings.HasPrefix(spec, "@"):
		path := spec[1:]
		b, err := readJSONFile("data", path)
		return b, path, err
	}
	return []byte(spec), "--data", checkJSON("data", "--data", []byte(spec))
}

// readJSONFile reads a JSON document named by a flag; field names the flag.
func readJSONFile(field, path string) ([]byte, error) {
	if path == "" {
		return nil, errs.Invalid(field, "--%s needs a file name", field)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Invalid(field, "file %s does not exist", path)
	}
	if err != nil {
		return nil, errs.Invalid(field, "cannot read %s: %v", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInput))
	if err != nil {
		return nil, errs.Invalid(field, "cannot read %s: %v", path, err)
	}
	return b, checkJSON(field, path, b)
}

// readProtoFile reads a JSON file into m, field names by the proto's JSON names.
func readProtoFile(field, path string, m proto.Message) error {
	b, err := readJSONFile(field, path)
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return errs.Invalid(field, "%s is not a valid %s: %v", path, m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}

// readSmallFile reads a file named by a flag that holds a credential or a
// certificate, at most max bytes; tooBig ends the message for a larger one.
func readSmallFile(field, path string, max int, tooBig string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Invalid(field, "file %s does not exist", path)
	}
	if err != nil {
		return nil, errs.Invalid(field, "cannot read %s: %v", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, errs.Invalid(field, "cannot read %s: %v", path, err)
	}
	if len(b) > max {
		return nil, errs.Invalid(field, "%s is %s", path, tooBig)
	}
	return b, nil
}

func checkJSON(field, source string, b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return errs.Invalid(field, "%s is not JSON: %v", source, err)
	}
	return nil
}
