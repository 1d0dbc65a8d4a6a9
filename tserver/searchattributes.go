package tserver

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/tserver/searchattrs"
)

// SearchAttributes returns the custom search attributes and their types:
// Keyword NodeId, SiteId, TenantId, ProfileId, Verb, BmcStatus; Int ProfileVersion. The
// names are constants in package searchattrs.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return searchattrs.SearchAttributes()
}

// RegisterSearchAttributes adds the missing custom search attributes to
// namespace through the OperatorService. It works on the embedded server and
// on an external cluster and is harmless to repeat.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	return searchattrs.Register(ctx, c, namespace)
}

// EnsureNamespace registers namespace (7-day retention) if it is missing.
// Used against external clusters.
func EnsureNamespace(ctx context.Context, c client.Client, namespace string) error {
	return searchattrs.EnsureNamespace(ctx, c, namespace)
}
