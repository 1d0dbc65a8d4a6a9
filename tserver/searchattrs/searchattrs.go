// Package searchattrs owns the custom Temporal search attributes of
// better-compute (NodeId, SiteId, TenantId, ProfileId, Verb, ProfileVersion,
// BmcStatus)
// and their registration, and the registration of a namespace. It imports only
// the Temporal SDK and API, so workflows, the CLI and site agents can name the
// attributes without linking the Temporal server; package tserver re-exports it.
package searchattrs

import (
	"context"
	"errors"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/errs"
)

// Names of the custom search attributes. Visibility queries use them as
// written here, e.g. `NodeId = "node_01k…"`.
const (
	NodeID         = "NodeId"         // Keyword: the node a workflow acts on
	SiteID         = "SiteId"         // Keyword: the node's site
	TenantID       = "TenantId"       // Keyword: the tenant that owns the node
	ProfileID      = "ProfileId"      // Keyword: the provision profile run
	Verb           = "Verb"           // Keyword: the verb (deploy, undeploy, …)
	ProfileVersion = "ProfileVersion" // Int: the version of the profile run
	// BmcStatus is a Keyword: "BMC H unreachable since T: …" while the
	// node's BMC is failing under a running verb; unset otherwise.
	BmcStatus = "BmcStatus"
)

// Retention is the workflow history retention of namespaces EnsureNamespace creates.
const Retention = 7 * 24 * time.Hour

// SearchAttributes returns the custom search attributes and their types (a
// fresh map each call).
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		NodeID:         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SiteID:         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		TenantID:       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		ProfileID:      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		Verb:           enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		ProfileVersion: enumspb.INDEXED_VALUE_TYPE_INT,
		BmcStatus:      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// Register adds to namespace the search attributes it lacks, through the
// OperatorService, then waits until the server lists them all. It works on
// the embedded server and on an external cluster, and is safe to repeat. An
// attribute that exists with another type is an INVALID_STATE error: the
// cluster was set up by something else and needs an operator.
func Register(ctx context.Context, c client.Client, namespace string) error {
	const op = "temporal.registerSearchAttributes"
	missing, err := missingAttributes(ctx, c, namespace)
	if err != nil {
		return withOp(err, op)
	}
	if len(missing) > 0 {
		_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        namespace,
			SearchAttributes: missing,
		})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return errs.Wrap(errs.Unavailable, err, "cannot add search attributes %v to namespace %q", sortedKeys(missing), namespace).WithOp(op)
		}
	}
	for {
		missing, err := missingAttributes(ctx, c, namespace)
		if err != nil {
			return withOp(err, op)
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return errs.Wrap(errs.Unavailable, ctx.Err(), "search attributes %v were added to namespace %q but are not listed yet", sortedKeys(missing), namespace).WithOp(op)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// missingAttributes lists the attributes namespace lacks; one that exists
// with another type is an error.
func missingAttributes(ctx context.Context, c client.Client, namespace string) (map[string]enumspb.IndexedValueType, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot list the search attributes of namespace %q", namespace)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, want := range SearchAttributes() {
		got, ok := resp.GetCustomAttributes()[name]
		if !ok {
			missing[name] = want
			continue
		}
		if got != want {
			return nil, errs.New(errs.InvalidState,
				"search attribute %s of namespace %q has type %v, want %v: remove it or use another namespace", name, namespace, got, want)
		}
	}
	return missing, nil
}

// EnsureNamespace registers namespace with a 7-day retention if it does not
// exist, and waits until the frontend serves it (its namespace cache is
// refreshed every few seconds). Safe to repeat; used against external
// clusters and by tests (the embedded server creates its own namespace).
func EnsureNamespace(ctx context.Context, c client.Client, namespace string) error {
	const op = "temporal.ensureNamespace"
	if namespace == "" {
		return errs.Invalid("namespace", "a Temporal namespace name is required").WithOp(op)
	}
	// Register first, describe only if we may not: asking for a namespace
	// before it exists makes the frontend cache its absence for a second.
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		Description:                      "better-compute",
		WorkflowExecutionRetentionPeriod: durationpb.New(Retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	var denied *serviceerror.PermissionDenied
	switch {
	case err == nil, errors.As(err, &exists):
	case errors.As(err, &denied):
		if _, derr := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); derr != nil {
			return errs.Wrap(errs.PermissionDenied, err, "namespace %q cannot be described and we may not register it: ask the cluster's operator to create it", namespace).WithOp(op)
		}
	default:
		return errs.Wrap(errs.Unavailable, err, "cannot register namespace %q", namespace).WithOp(op)
	}
	return withOp(waitNamespace(ctx, c, namespace), op)
}

// waitNamespace waits until a call that goes through the frontend's
// namespace cache succeeds.
func waitNamespace(ctx context.Context, c client.Client, namespace string) error {
	for {
		_, err := c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace,
			PageSize:  1,
		})
		var notFound *serviceerror.NamespaceNotFound
		if err == nil {
			return nil
		}
		if !errors.As(err, &notFound) {
			return errs.Wrap(errs.Unavailable, err, "namespace %q does not answer", namespace)
		}
		select {
		case <-ctx.Done():
			return errs.Wrap(errs.Unavailable, err, "namespace %q was registered but the frontend does not serve it yet", namespace)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func withOp(err error, op string) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.WithOp(op)
	}
	return err
}

func sortedKeys(m map[string]enumspb.IndexedValueType) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
