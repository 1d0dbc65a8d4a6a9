package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jmespath/go-jmespath"
	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/errs"
)

// output is what -o and --query asked for.
type output struct {
	format string // json or table
	query  *jmespath.JMESPath
}

func outputOf(c *cli.Context) (output, error) {
	o := output{format: c.String("output")}
	if o.format != "json" && o.format != "table" {
		return o, errs.Invalid("output", "-o must be json or table, not %q", o.format)
	}
	if q := c.String("query"); q != "" {
		jp, err := jmespath.Compile(q)
		if err != nil {
			return o, errs.Invalid("query", "bad JMESPath expression %q: %v", q, err)
		}
		o.query = jp
	}
	return o, nil
}

// render prints the answer raw: indented JSON, or a table of the objects'
// scalar fields; --query applies first.
func (o output) render(w io.Writer, raw []byte) error {
	if o.format == "json" && o.query == nil {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return errs.Wrap(errs.Internal, err, "the server's answer is not JSON")
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return errs.Wrap(errs.Internal, err, "the server's answer is not JSON")
	}
	if o.query != nil {
		var err error
		if v, err = o.query.Search(v); err != nil {
			return errs.Invalid("query", "JMESPath: %v", err)
		}
	}
	if o.format == "json" {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return errs.Wrap(errs.Internal, err, "encode the query result")
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	return renderTable(w, v, keyRanks(raw))
}

// renderTable prints scalars as they are, a list of scalars one per line, and
// objects as a table: the items of an answer's one list, else one row.
func renderTable(w io.Writer, v any, ranks map[string]int) error {
	var rows []map[string]any
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		for _, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				_, err := fmt.Fprintln(w, scalar(e))
				if err != nil {
					return err
				}
				continue
			}
			rows = append(rows, m)
		}
	case map[string]any:
		rows = rowsOf(x)
	default:
		_, err := fmt.Fprintln(w, scalar(x))
		return err
	}
	return writeTable(w, rows, ranks)
}

// rowsOf picks the rows of an object: the elements of its only list of
// objects (items, problems), else the object itself, with the fields of its
// only nested object (site, pool, profile) as its own.
func rowsOf(m map[string]any) []map[string]any {
	var lists []string
	var nested []string
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			nested = append(nested, k)
		case []any:
			if len(x) > 0 {
				if _, ok := x[0].(map[string]any); ok {
					lists = append(lists, k)
				}
			}
		}
	}
	if len(lists) == 1 && len(nested) == 0 {
		var rows []map[string]any
		for _, e := range m[lists[0]].([]any) {
			if r, ok := e.(map[string]any); ok {
				rows = append(rows, r)
			}
		}
		return rows
	}
	if len(nested) == 1 {
		row := map[string]any{}
		for k, v := range m[nested[0]].(map[string]any) {
			row[k] = v
		}
		for k, v := range m {
			if k != nested[0] {
				row[k] = v
			}
		}
		return []map[string]any{row}
	}
	return []map[string]any{m}
}

func writeTable(w io.Writer, rows []map[string]any, ranks map[string]int) error {
	cells := make([]map[string]string, len(rows))
	seen := map[string]bool{}
	var cols []string
	for i, r := range rows {
		cells[i] = map[string]string{}
		flatten(cells[i], r, "", 0)
		for k := range cells[i] {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	if len(cols) == 0 {
		return nil
	}
	sortColumns(cols, ranks)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = header(c)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, row := range cells {
		line := make([]string, len(cols))
		for i, c := range cols {
			line[i] = row[c]
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	return tw.Flush()
}

// flatten puts the scalar fields of m into cells, nested objects as
// "parent.child" up to two levels down; lists of scalars are joined with
// commas, lists of objects are left out.
func flatten(cells map[string]string, m map[string]any, prefix string, depth int) {
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			if depth < 2 {
				flatten(cells, x, prefix+k+".", depth+1)
			}
		case []any:
			if joined, ok := joinScalars(x); ok {
				cells[prefix+k] = joined
			}
		default:
			cells[prefix+k] = scalar(x)
		}
	}
}

// sortColumns puts id first, then follows the order in which the answer
// named the fields (the proto's order), then the alphabet.
func sortColumns(cols []string, ranks map[string]int) {
	rank := func(seg string) int {
		if r, ok := ranks[seg]; ok {
			return r
		}
		return len(ranks)
	}
	sort.SliceStable(cols, func(i, j int) bool {
		a, b := cols[i], cols[j]
		if (a == "id") != (b == "id") {
			return a == "id"
		}
		as, bs := strings.Split(a, "."), strings.Split(b, ".")
		for n := 0; n < len(as) && n < len(bs); n++ {
			if as[n] == bs[n] {
				continue
			}
			if ra, rb := rank(as[n]), rank(bs[n]); ra != rb {
				return ra < rb
			}
			return as[n] < bs[n]
		}
		return len(as) < len(bs)
	})
}

// keyRanks numbers the object keys of a JSON document in the order they first
// appear: protojson writes fields in their declaration order.
func keyRanks(raw []byte) map[string]int {
	ranks := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ranks
		}
		top := len(stack) - 1
		if s, ok := tok.(string); ok && top >= 0 && stack[top].object && stack[top].wantKey {
			if _, seen := ranks[s]; !seen {
				ranks[s] = len(ranks)
			}
			stack[top].wantKey = false
			continue
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			stack = stack[:top]
			continue
		}
		if top >= 0 && stack[top].object {
			stack[top].wantKey = true
		}
		if isDelim {
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
		}
	}
}

// header turns "policy.hardwareProfile" into "POLICY.HARDWARE_PROFILE".
func header(col string) string {
	var b strings.Builder
	for i, r := range col {
		if r >= 'A' && r <= 'Z' && i > 0 && col[i-1] != '.' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// joinScalars joins a list of scalars with commas; false for a list of objects.
func joinScalars(list []any) (string, bool) {
	parts := make([]string, 0, len(list))
	for _, e := range list {
		switch e.(type) {
		case map[string]any, []any:
			return "", false
		}
		parts = append(parts, scalar(e))
	}
	return strings.Join(parts, ","), true
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
