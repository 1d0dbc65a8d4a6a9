package api

import (
	"context"
	"fmt"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

// Limits of every string the API accepts. A field not named in fieldLimits
// gets defaultLimit; strings inside a google.protobuf.Struct (a profile
// step's arguments) are free text and get freeTextLimit.
const (
	defaultLimit  = 512
	freeTextLimit = 64 << 10
	maxListItems  = 1024
	echoLimit     = 64 // bytes of an input an error may quote
)

// fieldLimits overrides defaultLimit by the proto field's name.
var fieldLimits = map[protoreflect.Name]int{
	"source": 4096,     // an image URL
	"reason": 1024,     // abort and maintenance reasons
	"ca_pem": 64 << 10, // a BMC's CA certificates (bmc.TLS bounds them the same)
}

// textFields hold multi-line text (PEM), so they may hold line breaks.
var textFields = map[protoreflect.Name]bool{"ca_pem": true}

// idFields are fields that hold an id of a fixed kind wherever they appear;
// empty means "not given" and is left to the handler.
var idFields = map[protoreflect.Name]string{
	"node_id": ids.Node,
	"site_id": ids.Site,
	"pool_id": ids.Pool,
}

// messageIDs are the "id" fields whose kind only their message says.
var messageIDs = map[protoreflect.FullName]string{
	"bettercompute.v1.GetNodeRequest.id":  ids.Node,
	"bettercompute.v1.GetSiteRequest.id":  ids.Site,
	"bettercompute.v1.GetPoolRequest.id":  ids.Pool,
	"bettercompute.v1.GetImageRequest.id": ids.Image,
}

// inputInterceptor checks every request before any handler runs, so a method
// added later is covered without a line of its own: no control character in
// any string (NUL, CR and LF included; free text may hold tabs and line
// breaks, never NUL), every string and list within its limit, every id field
// shaped like its kind. The error names the field by its JSON name.
func inputInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if m, ok := req.Any().(proto.Message); ok {
				if err := checkMessage("", m.ProtoReflect()); err != nil {
					return nil, err
				}
			}
			return next(ctx, req)
		}
	}
}

// checkMessage walks m's fields in declaration order and returns the first
// problem; prefix is the JSON path of m ("" at the top).
func checkMessage(prefix string, m protoreflect.Message) error {
	if m.Descriptor().FullName() == "google.protobuf.Struct" {
		return checkStruct(prefix, m.Interface().(*structpb.Struct))
	}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if err := checkField(fieldPath(prefix, fd.JSONName()), fd, m.Get(fd)); err != nil {
			return err
		}
	}
	return nil
}

func checkField(path string, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch {
	case fd.IsMap():
		return checkMap(path, fd, v.Map())
	case fd.IsList():
		l := v.List()
		if l.Len() > maxListItems {
			return errs.Invalid(path, "holds %d items; at most %d are accepted", l.Len(), maxListItems)
		}
		for i := 0; i < l.Len(); i++ {
			if err := checkValue(fmt.Sprintf("%s[%d]", path, i), fd, l.Get(i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := checkValue(path, fd, v); err != nil {
		return err
	}
	prefix, ok := idFields[fd.Name()]
	if !ok {
		prefix, ok = messageIDs[fd.FullName()]
	}
	if ok && fd.Kind() == protoreflect.StringKind && !ids.Valid(prefix, v.String()) {
		return errs.Invalid(path, "want an id like %s_01k5w…, got %s", prefix, quote(v.String()))
	}
	return nil
}

func checkMap(path string, fd protoreflect.FieldDescriptor, m protoreflect.Map) error {
	if m.Len() > maxListItems {
		return errs.Invalid(path, "holds %d entries; at most %d are accepted", m.Len(), maxListItems)
	}
	var err error
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		p := path + "." + k.String()
		if err = checkString(path, k.String(), defaultLimit, false); err == nil {
			err = checkValue(p, fd.MapValue(), v)
		}
		return err == nil
	})
	return err
}

func checkValue(path string, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		limit, ok := fieldLimits[fd.Name()]
		if !ok {
			limit = defaultLimit
		}
		return checkString(path, v.String(), limit, textFields[fd.Name()])
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(path, v.Message())
	}
	return nil
}

// checkStruct checks free-form JSON (a profile step's "with"): its keys are
// names, its strings free text.
func checkStruct(path string, s *structpb.Struct) error {
	if len(s.GetFields()) > maxListItems {
		return errs.Invalid(path, "holds %d entries; at most %d are accepted", len(s.GetFields()), maxListItems)
	}
	for k, v := range s.GetFields() {
		if err := checkString(path, k, defaultLimit, false); err != nil {
			return err
		}
		if err := checkJSONValue(fieldPath(path, k), v); err != nil {
			return err
		}
	}
	return nil
}

func checkJSONValue(path string, v *structpb.Value) error {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return checkString(path, k.StringValue, freeTextLimit, true)
	case *structpb.Value_StructValue:
		return checkStruct(path, k.StructValue)
	case *structpb.Value_ListValue:
		if n := len(k.ListValue.GetValues()); n > maxListItems {
			return errs.Invalid(path, "holds %d items; at most %d are accepted", n, maxListItems)
		}
		for i, e := range k.ListValue.GetValues() {
			if err := checkJSONValue(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkString refuses invalid UTF-8, a string over limit bytes, and any
// control character (C0, DEL, C1); free text may hold tab, CR and LF.
func checkString(path, s string, limit int, freeText bool) error {
	if len(s) > limit {
		return errs.Invalid(path, "is %d bytes; at most %d are accepted", len(s), limit)
	}
	if !utf8.ValidString(s) {
		return errs.Invalid(path, "is not valid UTF-8")
	}
	for i, r := range s {
		if freeText && (r == '\t' || r == '\n' || r == '\r') {
			continue
		}
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return errs.Invalid(path, "holds the control character %U at byte %d; only printable text is accepted", r, i)
		}
	}
	return nil
}

// quote quotes at most echoLimit bytes of s, so an error never carries a
// large input back.
func quote(s string) string {
	if c := clip(s, echoLimit); c != s {
		return fmt.Sprintf("%q…", c)
	}
	return fmt.Sprintf("%q", s)
}

// clip returns at most n bytes of s, cut at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func fieldPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
