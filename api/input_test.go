package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/api"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/store"
)

// method is one RPC of the API and the server that answers it.
type method struct {
	procedure string
	input     protoreflect.MessageType
	agents    bool // served on the agents' TLS listener
}

// allMethods lists every method of every service in the generated
// descriptors, so a method added later is swept without a line here.
func allMethods(t *testing.T) []method {
	t.Helper()
	var out []method
	for _, f := range []protoreflect.FileDescriptor{v1.File_bettercompute_v1_resources_proto,
		v1.File_bettercompute_v1_metal_proto, v1.File_bettercompute_v1_secrets_proto, v1.File_bettercompute_v1_agents_proto} {
		for i := 0; i < f.Services().Len(); i++ {
			sd := f.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, method{procedure: "/" + string(sd.FullName()) + "/" + string(md.Name()), input: mt,
					agents: f == v1.File_bettercompute_v1_agents_proto})
			}
		}
	}
	return out
}

// fill sets every string of m, at any depth (lists get one item, maps one
// entry, a Struct one string), to v; it reports whether it set any.
func fill(m protoreflect.Message, v string, depth int) bool {
	if depth > 4 {
		return false
	}
	set := false
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind {
				m.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString(v))
				set = true
			}
		case fd.Kind() == protoreflect.StringKind && fd.IsList():
			m.Mutable(fd).List().Append(protoreflect.ValueOfString(v))
			set = true
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(v))
			set = true
		case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Struct":
			s, _ := structpb.NewStruct(map[string]any{"k": v})
			if fd.IsList() {
				m.Mutable(fd).List().Append(protoreflect.ValueOfMessage(s.ProtoReflect()))
			} else {
				m.Set(fd, protoreflect.ValueOfMessage(s.ProtoReflect()))
			}
			set = true
		case fd.Message() != nil && strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf."):
		case fd.Message() != nil && fd.IsList():
			l := m.Mutable(fd).List()
			e := l.NewElement()
			if fill(e.Message(), v, depth+1) {
				l.Append(e)
				set = true
			}
		case fd.Message() != nil:
			e := m.NewField(fd)
			if fill(e.Message(), v, depth+1) {
				m.Set(fd, e)
				set = true
			}
		}
	}
	return set
}

// rowCounts counts the rows of every table of the schema.
func rowCounts(t *testing.T, s *store.Store) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string]int{}
	for _, n := range tables {
		var c int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM "`+n+`"`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

// post sends body to procedure as Connect JSON and decodes the answer.
func post(t *testing.T, c *http.Client, url, tok, procedure string, body []byte) (int, map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+procedure, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, string(b)
}

// TestEveryMethodRefusesBadStrings sends every method of every service a
// request whose every string holds a NUL, a line break, or 8 KiB: each is
// INVALID_INPUT naming a field, never a 5xx, quotes no more than a short
// prefix of the input, and writes nothing.
func TestEveryMethodRefusesBadStrings(t *testing.T) {
	e := newEnv(t)
	agents := httptest.NewTLSServer(api.New(api.Config{Store: e.store}).AgentsHandler(api.Agents{}))
	t.Cleanup(agents.Close)
	before := rowCounts(t, e.store)
	values := map[string]string{"nul": "a\x00b", "newline": "a\nb", "oversized": strings.Repeat("a", 8<<10)}
	swept := 0
	for _, m := range allMethods(t) {
		for name, v := range values {
			msg := m.input.New()
			if !fill(msg, v, 0) {
				if name == "nul" {
					t.Logf("%s takes no string", m.procedure)
				}
				continue
			}
			body, err := protojson.Marshal(msg.Interface().(proto.Message))
			if err != nil {
				t.Fatal(err)
			}
			url, client := e.url, http.DefaultClient
			if m.agents {
				url, client = agents.URL, agents.Client()
			}
			code, out, raw := post(t, client, url, e.root, m.procedure, body)
			if code != http.StatusBadRequest || kindOf(out) != "INVALID_INPUT" || field(out) == "" {
				t.Errorf("%s(%s) = %d %s field %q, want 400 INVALID_INPUT naming a field", m.procedure, name, code, kindOf(out), field(out))
			}
			if len(raw) > 1024 {
				t.Errorf("%s(%s) answered %d bytes, want the input not echoed", m.procedure, name, len(raw))
			}
			swept++
		}
	}
	if swept < 3*20 {
		t.Errorf("swept %d requests, want every method (at least 60)", swept)
	}
	after := rowCounts(t, e.store)
	for table, n := range before {
		if after[table] != n {
			t.Errorf("rows of %s = %d after the sweep, want %d (nothing written)", table, after[table], n)
		}
	}
}

// TestIDsAreShapeChecked: an id of the wrong kind or shape is INVALID_INPUT
// naming its field, before any lookup.
func TestIDsAreShapeChecked(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ procedure, body, field string }{
		{sitesGet, `{"id":"pool_01k5w0000000000000000000000"}`, "id"},
		{"/bettercompute.v1.PoolsService/Get", `{"id":"x"}`, "id"},
		{"/bettercompute.v1.ImagesService/Get", `{"id":"../img"}`, "id"},
		{"/bettercompute.v1.MetalService/Get", `{"id":"node_1"}`, "id"},
		{poolsList, `{"siteId":"site_x"}`, "siteId"},
		{"/bettercompute.v1.CommandsService/List", `{"nodeId":"site_01k5w0000000000000000000000"}`, "nodeId"},
	} {
		code, out := e.call(e.root, tc.procedure, tc.body)
		if kindOf(out) != "INVALID_INPUT" || field(out) != tc.field {
			t.Errorf("%s(%s) = %d %s %q, want INVALID_INPUT %s", tc.procedure, tc.body, code, kindOf(out), field(out), tc.field)
		}
	}
}

// wrongTyped returns, for each field of mt, a JSON body giving that field a
// value of another JSON type than protojson expects.
func wrongTyped(mt protoreflect.MessageType) map[string]string {
	out := map[string]string{}
	fields := mt.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		v := `"x"` // numbers, bools, enums, lists, maps and messages refuse a bare word
		switch {
		case fd.IsList() || fd.IsMap():
		case fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind:
			v = `{"a":1}`
		case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value":
			continue // any JSON is a Value
		}
		out[fd.JSONName()] = `{"` + fd.JSONName() + `":` + v + `}`
	}
	return out
}

// TestEveryMethodRefusesMalformedInput sends every method of every service
// malformed JSON, an unknown field, and each of its fields with a value of
// the wrong type: each is 400 INVALID_INPUT, never a 5xx, quotes no more
// than a short prefix of the input, and writes nothing.
func TestEveryMethodRefusesMalformedInput(t *testing.T) {
	e := newEnv(t)
	agents := httptest.NewTLSServer(api.New(api.Config{Store: e.store}).AgentsHandler(api.Agents{}))
	t.Cleanup(agents.Close)
	before := rowCounts(t, e.store)
	swept := 0
	for _, m := range allMethods(t) {
		bodies := map[string]string{"truncated": `{"`, "array": `[]`, "unknown field": `{"noSuchField` + strings.Repeat("x", 4096) + `":1}`}
		named := map[string]string{} // body name → the field the error must name
		for name, b := range wrongTyped(m.input) {
			bodies["wrong type of "+name] = b
			if fd := m.input.Descriptor().Fields().ByJSONName(name); fd.Message() == nil && !fd.IsList() {
				named["wrong type of "+name] = name
			}
		}
		url, client := e.url, http.DefaultClient
		if m.agents {
			url, client = agents.URL, agents.Client()
		}
		for name, body := range bodies {
			code, out, raw := post(t, client, url, e.root, m.procedure, []byte(body))
			if code != http.StatusBadRequest || kindOf(out) != "INVALID_INPUT" {
				t.Errorf("%s(%s) = %d %s, want 400 INVALID_INPUT", m.procedure, name, code, kindOf(out))
			}
			if want := named[name]; want != "" && field(out) != want {
				t.Errorf("%s(%s) names field %q, want %q", m.procedure, name, field(out), want)
			}
			if len(raw) > 1024 {
				t.Errorf("%s(%s) answered %d bytes, want the input not echoed", m.procedure, name, len(raw))
			}
			swept++
		}
	}
	if swept < 4*len(allMethods(t)) {
		t.Errorf("swept %d requests over %d methods, want at least 4 each", swept, len(allMethods(t)))
	}
	after := rowCounts(t, e.store)
	for table, n := range before {
		if after[table] != n {
			t.Errorf("rows of %s = %d after the sweep, want %d (nothing written)", table, after[table], n)
		}
	}
}
