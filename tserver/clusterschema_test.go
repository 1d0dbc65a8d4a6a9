package tserver

import (
	"context"
	"os"
	"testing"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	persistenceClient "go.temporal.io/server/common/persistence/client"
	"go.temporal.io/server/common/persistence/serialization"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/temporal"

	"github.com/better-compute/better-compute/internal/testpg"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// TestSetupSchemaLeavesTheServerNothingToUpdate: after SetupSchema, a
// cluster process's start (Temporal's own ApplyClusterMetadataConfigProvider,
// which every process runs) finds the cluster's record as it would have
// written it and writes nothing. Were it to update the record, processes
// started at once would each try from the version they read, and all but
// the first would fail to start with "SaveClusterMetadata encountered
// version mismatch" (a history service of TestFleetCluster did so in CI):
// the record lacked the secondary visibility index the server keys too.
func TestSetupSchemaLeavesTheServerNothingToUpdate(t *testing.T) {
	ctx := context.Background()
	cs := ClusterStore{DatabaseURL: testpg.NewDatabase(t), HistoryShards: 4, FrontendAddress: "127.0.0.1:7233", MaxConns: 2}
	if err := SetupSchema(ctx, cs); err != nil {
		t.Fatalf("SetupSchema = %v", err)
	}
	st, err := sqlStores(cs)
	if err != nil {
		t.Fatal(err)
	}
	mgr, done, err := clusterMetadataManager(st, log.NewNoopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	version := func() int64 {
		t.Helper()
		got, err := mgr.GetClusterMetadata(ctx, &persistence.GetClusterMetadataRequest{ClusterName: ClusterName})
		if err != nil {
			t.Fatal(err)
		}
		return got.Version
	}
	before := version()
	svc := clusterServerConfig(ClusterConfig{Store: cs}, st)
	if _, _, err := temporal.ApplyClusterMetadataConfigProvider(log.NewNoopLogger(), svc, resolver.NewNoopResolver(),
		persistenceClient.FactoryProvider, nil, nil, metrics.NoopMetricsHandler, serialization.NewSerializer()); err != nil {
		t.Fatalf("the server's cluster metadata start = %v", err)
	}
	if after := version(); after != before {
		t.Errorf("the server rewrote the cluster record SetupSchema stored (version %d → %d): processes starting at once would race", before, after)
	}
}
