package tserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver/searchattrs"
)

const (
	// ClusterName is the name of the embedded cluster (master and current).
	ClusterName = "active"
	// ClusterID is fixed so that a restart on the same database is the same
	// cluster (an empty or invalid id makes a new one each start).
	ClusterID = "5f0b7a9e-3c1d-4e8a-9b2f-6d4c8e1a7b30"
	// DatabaseFile is the SQLite file inside Config.DataDir.
	DatabaseFile = "temporal.db"

	storeName = "sqlite-default"
	loopback  = "127.0.0.1"
)

// ports are the ports resolved from Config before anything binds.
type ports struct {
	frontend, history, matching, worker int
	ui                                  int // 0: no UI
}

// sqlConfig returns the SQLite store of cfg: a WAL file DataDir/temporal.db,
// with its schema set up when the file is new, or a private in-memory database.
func sqlConfig(cfg Config) (*config.SQL, error) {
	sc := &config.SQL{PluginName: sqliteplugin.PluginName}
	if cfg.DataDir == "" {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "cannot name an in-memory database")
		}
		sc.DatabaseName = "bc-" + hex.EncodeToString(b)
		sc.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		return sc, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the data directory %s", cfg.DataDir)
	}
	sc.DatabaseName = filepath.Join(cfg.DataDir, DatabaseFile)
	// Pragmas without the "_" prefix: the plugin silently ignores prefixed ones.
	sc.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"}
	_, err := os.Stat(sc.DatabaseName)
	if err == nil {
		return sc, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(errs.Internal, err, "cannot stat the Temporal database %s", sc.DatabaseName)
	}
	if err := sqliteschema.SetupSchema(sc); err != nil {
		// Leave no half-made database behind: the next start would skip the schema.
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(sc.DatabaseName + suffix)
		}
		return nil, errs.Wrap(errs.Internal, err, "cannot set up the Temporal schema in %s", sc.DatabaseName)
	}
	return sc, nil
}

// createNamespace creates the namespace (with the search attributes) in the
// database before the server starts; it does nothing if it exists.
func createNamespace(sc *config.SQL, namespace string) error {
	ns, err := sqliteschema.NewNamespaceConfig(ClusterName, namespace, false, searchattrs.SearchAttributes())
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot build namespace %q", namespace)
	}
	if err := sqliteschema.CreateNamespaces(sc, ns); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot create namespace %q", namespace)
	}
	return nil
}

// serverConfig is the static configuration of a single-process cluster on
// one SQLite store, as the Temporal CLI's dev server builds it.
func serverConfig(cfg Config, sc *config.SQL, p ports) *config.Config {
	var c config.Config
	dial := connectHost(cfg.Host)
	frontend := net.JoinHostPort(dial, strconv.Itoa(p.frontend))
	c.Global.Membership.MaxJoinDuration = 30 * time.Second
	c.Global.Membership.BroadcastAddress = loopback // only ringpop reads it; we use static hosts
	c.Persistence = config.Persistence{
		DefaultStore:     storeName,
		VisibilityStore:  storeName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{storeName: {SQL: sc}},
	}
	c.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        ClusterName,
		CurrentClusterName:       ClusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			ClusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				ClusterID:              ClusterID,
			},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"
	c.Services = map[string]config.Service{
		"frontend": serviceConfig(cfg.Host, p.frontend),
		// The internal services listen on loopback only, whatever Host is.
		"history":  serviceConfig(loopback, p.history),
		"matching": serviceConfig(loopback, p.matching),
		"worker":   serviceConfig(loopback, p.worker),
	}
	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	c.PublicClient.HostPort = frontend
	return &c
}

func serviceConfig(ip string, port int) config.Service {
	var s config.Service
	s.RPC.GRPCPort = port
	s.RPC.BindOnIP = ip
	return s
}

// dynamicConfig is the dev server's: search attributes added at run time are
// usable at once (the cache is refreshed on read), so the persistence rate
// limits are raised to pay for it.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():      true,
		dynamicconfig.FrontendPersistenceMaxQPS.Key():                    10000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():                     45000,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		// The queue processors are rate-limited to 20 loads a second by
		// default: with one history shard every activity dispatch then waits
		// ~50 ms, which made one machine's deploy+undeploy take 2.4 s instead
		// of 0.4 s (BenchmarkFleet). They are woken by new tasks, so a higher
		// limit costs nothing when idle.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,
		// A queue processor keeps every task it loaded, done or not, until
		// its next checkpoint (30 s by default) drops the done ones, and each
		// load of new tasks walks all it keeps (executableTracker.split): at
		// 200 machines at once (BenchmarkFleet) that walk was 8.3% of the
		// CPU of our loop and 3.3% of bare Temporal's. A checkpoint every
		// 2 s keeps the walk short (it no longer shows in the profile); it
		// writes the queue's ack level to the shard.
		dynamicconfig.TransferProcessorUpdateAckInterval.Key():   2 * time.Second,
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key(): 2 * time.Second,
	}
}
