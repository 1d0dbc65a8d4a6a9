package codec

import (
	"context"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func keyOf(t *testing.T, tenant string) Key {
	t.Helper()
	k := newKey(t)
	return Key{ID: KeyID(k), Tenant: tenant, Key: k}
}

// TestWorkflowPayloadsUseTheirTenantsKey: inside a workflow the converter
// encrypts with the key of the tenant its TenantId search attribute names
// (what a site of that tenant alone decrypts); a workflow of no tenant,
// and a client call without WithTenant, use the control plane's own key.
func TestWorkflowPayloadsUseTheirTenantsKey(t *testing.T) {
	t.Parallel()
	own, a, b := keyOf(t, ""), keyOf(t, "a"), keyOf(t, "b")
	ring, err := NewKeyring(nil, own, a, b)
	if err != nil {
		t.Fatal(err)
	}
	dc := ring.DataConverter("")
	keyIDIn := func(ctx workflow.Context) (string, error) {
		p, err := dc.(workflow.ContextAware).WithWorkflowContext(ctx).ToPayload("x")
		if err != nil {
			return "", err
		}
		return string(p.Metadata[MetadataKeyID]), nil
	}
	for _, tt := range []struct {
		tenant string
		want   Key
	}{{"a", a}, {"b", b}, {"", own}} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		if tt.tenant != "" {
			env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(TenantAttribute.ValueSet(tt.tenant)))
		}
		env.ExecuteWorkflow(keyIDIn)
		var got string
		if err := env.GetWorkflowResult(&got); err != nil || got != tt.want.ID {
			t.Errorf("key id in a workflow of tenant %q = %q, %v; want %s", tt.tenant, got, err, tt.want.ID)
		}
	}
	for ctx, want := range map[context.Context]Key{WithTenant(context.Background(), "b"): b, context.Background(): own} {
		p, err := dc.(workflow.ContextAware).WithContext(ctx).ToPayload("x")
		if err != nil || string(p.Metadata[MetadataKeyID]) != want.ID {
			t.Errorf("WithContext(%v).ToPayload key id = %q, %v; want %s", ctx, p.GetMetadata()[MetadataKeyID], err, want.ID)
		}
	}
	// The serialization context the SDK applies first does not lose the tenant.
	sc := converter.WithDataConverterSerializationContext(dc, converter.WorkflowSerializationContext{Namespace: "ns"})
	if p, _ := sc.(workflow.ContextAware).WithContext(WithTenant(context.Background(), "a")).ToPayload("x"); string(p.Metadata[MetadataKeyID]) != a.ID {
		t.Errorf("after a serialization context, key id = %q, want a's %s", p.Metadata[MetadataKeyID], a.ID)
	}
}
