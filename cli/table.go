package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/errs"
)

// showColumns prints a table of the named columns, in that order, when the
// table format is asked for without --query; otherwise it shows the answer as
// every other command does. The answer is read into msg and written back with
// every field, so a column is there even when its value is empty. rows names
// the list (or object) of the answer whose elements are the rows; "" is the
// answer itself. A column "a.b" is field b of object a; its header is the last part.
func showColumns(s *session, raw []byte, msg proto.Message, rows string, cols []string) error {
	if s.out.format != "table" || s.out.query != nil {
		return s.show(raw)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, msg); err != nil {
		return errs.Wrap(errs.Internal, err, "decode the answer")
	}
	full, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(msg)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode the answer")
	}
	var doc map[string]any
	if err := json.Unmarshal(full, &doc); err != nil {
		return errs.Wrap(errs.Internal, err, "the server's answer is not JSON")
	}
	var items []any
	switch v := lookup(doc, rows).(type) {
	case []any:
		items = v
	case map[string]any:
		items = []any{v}
	}
	return writeColumns(s.stdout, items, cols)
}

// lookup follows a dotted path through nested objects; "" is doc itself.
func lookup(doc any, path string) any {
	if path == "" {
		return doc
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[k]
	}
	return doc
}

// writeColumns prints items as a table with exactly cols, in order.
func writeColumns(w io.Writer, items []any, cols []string) error {
	if len(items) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := make([]string, len(cols))
	for i, c := range cols {
		line[i] = header(c[strings.LastIndex(c, ".")+1:])
	}
	fmt.Fprintln(tw, strings.Join(line, "\t"))
	for _, item := range items {
		for i, c := range cols {
			line[i] = cell(lookup(item, c))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	return tw.Flush()
}

// cell is a value as a table shows it: lists of scalars joined with commas.
func cell(v any) string {
	if list, ok := v.([]any); ok {
		joined, _ := joinScalars(list)
		return joined
	}
	return scalar(v)
}
