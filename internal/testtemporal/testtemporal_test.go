package testtemporal

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/tserver/searchattrs"
)

// TestEncryptedHistory runs a workflow through the shared server with the
// encrypting data converter: the result comes back in clear to the client,
// the secret is nowhere in the stored history, and the workflow is found by
// its search attribute in the fresh namespace.
func TestEncryptedHistory(t *testing.T) {
	const secret = "hunter2-bmc-password"
	key := make([]byte, codec.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ns := Namespace(t)
	c := Client(t, ns, codec.NewDataConverter(key))

	w := worker.New(c, "tq", worker.Options{DisableRegistrationAliasing: true})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, in string) (string, error) {
		return "echo:" + in, nil
	}, workflow.RegisterOptions{Name: "Echo"})
	if err := w.Start(); err != nil {
		t.Fatalf("worker.Start = %v", err)
	}
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		TaskQueue: "tq",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(searchattrs.NodeID).ValueSet("node_enc")),
	}, "Echo", secret)
	if err != nil {
		t.Fatalf("ExecuteWorkflow = %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "echo:"+secret {
		t.Fatalf("Echo(%q) = %q, %v, want %q", secret, got, err, "echo:"+secret)
	}

	// Read the raw history with a client that has no key.
	raw := Client(t, ns, nil)
	hist, err := raw.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: ns,
		Execution: &commonpb.WorkflowExecution{WorkflowId: run.GetID(), RunId: run.GetRunID()},
	})
	if err != nil {
		t.Fatalf("GetWorkflowExecutionHistory = %v", err)
	}
	blob, err := hist.GetHistory().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("hunter2")) {
		t.Errorf("stored history holds the secret in clear")
	}
	if !bytes.Contains(blob, []byte(codec.EncodingEncrypted)) {
		t.Errorf("stored history has no payload marked %s", codec.EncodingEncrypted)
	}

	query := `NodeId = "node_enc"`
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := raw.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns, Query: query})
		if err != nil {
			t.Fatalf("ListWorkflow(%q) = %v", query, err)
		}
		if n := len(resp.GetExecutions()); n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("ListWorkflow(%q) found %d executions, want 1", query, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNamespacesAreFresh checks two calls give two usable namespaces.
func TestNamespacesAreFresh(t *testing.T) {
	a, b := Namespace(t), Namespace(t)
	if a == b {
		t.Errorf("Namespace() twice = %q, %q, want different names", a, b)
	}
}
