package tserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/serviceerror"
	persistencespb "go.temporal.io/server/api/persistence/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/serialization"
	tsql "go.temporal.io/server/common/persistence/sql"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/searchattribute/sadefs"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver/searchattrs"
)

// Schemas of Temporal's PostgreSQL store, embedded in go.temporal.io/server/schema.
const (
	pgMainSchema       = "postgresql/v12/temporal"
	pgVisibilitySchema = "postgresql/v12/visibility"
	// VisibilitySuffix names the visibility database: <database>_visibility
	// beside the database of --database-url.
	VisibilitySuffix = "_visibility"
	// setupLockKey is the advisory lock that serializes schema set-up between
	// processes that start at once (an arbitrary constant: "bctmprl").
	setupLockKey = 0x6263746d70726c
)

// ClusterStore is where a Temporal cluster keeps its state: two PostgreSQL
// databases (persistence and visibility) and the number of history shards,
// fixed at the first set-up.
type ClusterStore struct {
	// DatabaseURL is postgres://user:password@host:port/database?params, or
	// postgres:///database?host=/socket/dir for a Unix socket. Its database
	// holds persistence; <database>_visibility holds visibility.
	DatabaseURL string
	// HistoryShards is the number of history shards. The first set-up stores
	// it; a later one with another number is refused.
	HistoryShards int32
	// Namespace is created (with the search attributes) at set-up; "" is
	// "default".
	Namespace string
	// FrontendAddress is the cluster's address as stored in its metadata;
	// every process must give the same one.
	FrontendAddress string
	// MaxConns bounds each process's connections to the database (half as
	// many to visibility); 0 means 20.
	MaxConns int
	Logger   *slog.Logger
}

// stores are the persistence and visibility stores of a ClusterStore.
type stores struct{ main, visibility *config.SQL }

// sqlStores parses cs.DatabaseURL into Temporal's SQL configs (the pgx
// driver). Errors name the field; the password is never in them.
func sqlStores(cs ClusterStore) (stores, error) {
	if cs.DatabaseURL == "" {
		return stores{}, errs.Invalid("database-url", "the cluster's PostgreSQL is required (postgres://user:password@host:port/database)")
	}
	u, err := url.Parse(cs.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return stores{}, errs.Invalid("database-url", "want postgres://user:password@host:port/database")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return stores{}, errs.Invalid("database-url", "names no database (postgres://…/database)")
	}
	main := &config.SQL{PluginName: pgplugin.PluginNamePGX, DatabaseName: db, ConnectAttributes: map[string]string{}}
	// A Unix socket (host=/dir in the query) overrides the address in the DSN.
	main.ConnectAddr = u.Host
	if main.ConnectAddr == "" {
		main.ConnectAddr = "localhost:5432"
	} else if _, _, err := net.SplitHostPort(main.ConnectAddr); err != nil {
		main.ConnectAddr = net.JoinHostPort(u.Host, "5432")
	}
	main.User = u.User.Username()
	main.Password, _ = u.User.Password()
	for k, v := range u.Query() {
		main.ConnectAttributes[k] = v[0]
	}
	main.MaxConns = cs.MaxConns
	if main.MaxConns <= 0 {
		main.MaxConns = 20
	}
	main.MaxIdleConns = main.MaxConns
	vis := *main
	vis.DatabaseName = db + VisibilitySuffix
	vis.MaxConns = max(1, main.MaxConns/2)
	vis.MaxIdleConns = vis.MaxConns
	return stores{main: main, visibility: &vis}, nil
}

// SetupSchema creates the two databases if they are missing, sets up or
// upgrades Temporal's schema in them with Temporal's own schema tool (its
// embedded PostgreSQL schema files), records the number of history shards
// and creates the namespace. It is idempotent, and processes that run it at
// once take turns (an advisory lock). A stored shard count other than
// cs.HistoryShards is INVALID_STATE naming the stored value.
func SetupSchema(ctx context.Context, cs ClusterStore) error {
	const op = "temporal.setupSchema"
	if cs.HistoryShards < 1 {
		return errs.Invalid("history-shards", "want at least 1, got %d", cs.HistoryShards).WithOp(op)
	}
	st, err := sqlStores(cs)
	if err != nil {
		return withOp(err, op)
	}
	logger := slogLogger{log: orDiscard(cs.Logger), min: levelVar(slog.LevelWarn)}
	for _, sc := range []*config.SQL{st.main, st.visibility} {
		if err := ensureDatabase(sc, logger); err != nil {
			return withOp(err, op)
		}
	}
	unlock, err := setupLock(ctx, cs.DatabaseURL)
	if err != nil {
		return withOp(err, op)
	}
	defer unlock()
	if err := migrate(st.main, pgMainSchema, logger); err != nil {
		return withOp(err, op)
	}
	if err := migrate(st.visibility, pgVisibilitySchema, logger); err != nil {
		return withOp(err, op)
	}
	if err := ensureClusterMetadata(ctx, cs, st, logger); err != nil {
		return withOp(err, op)
	}
	if err := createClusterNamespace(st.main, cs.Namespace); err != nil {
		return withOp(err, op)
	}
	return nil
}

// ensureDatabase creates sc's database unless it exists. A user without
// CREATEDB may still use a database an administrator made.
func ensureDatabase(sc *config.SQL, logger log.Logger) error {
	c := *sc
	err := sqltool.DoCreateDatabase(&c, "postgres", logger)
	if err == nil {
		return nil
	}
	conn, cerr := sqltool.NewConnection(sc, logger)
	if cerr == nil {
		_, cerr = conn.ListTables()
		conn.Close()
		if cerr == nil {
			return nil
		}
	}
	return errs.Wrap(errs.Unavailable, err, "cannot create or open database %q", sc.DatabaseName)
}

// setupLock takes the set-up advisory lock on its own connection and
// returns its release.
func setupLock(ctx context.Context, dbURL string) (func(), error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot connect to the Temporal database")
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(setupLockKey)); err != nil {
		conn.Close(context.Background())
		return nil, errs.Wrap(errs.Unavailable, err, "cannot take the schema set-up lock")
	}
	return func() { conn.Close(context.Background()) }, nil // closing releases the lock
}

// migrate runs Temporal's setup-schema (version tables at 0.0, a no-op when
// they exist) and then update-schema through every versioned directory of
// name, as `temporal-sql-tool setup-schema -v 0.0` and `update-schema -d`
// do.
func migrate(sc *config.SQL, name string, logger log.Logger) error {
	conn, err := sqltool.NewConnection(sc, logger)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot connect to database %q", sc.DatabaseName)
	}
	defer conn.Close()
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot set up the schema version tables of %q", sc.DatabaseName)
	}
	up := &schema.UpdateConfig{DBName: sc.DatabaseName, SchemaName: name}
	if err := schema.NewUpdateSchemaTask(conn, up, logger).Run(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot update the schema of %q to %s", sc.DatabaseName, name)
	}
	return nil
}

// ensureClusterMetadata stores the cluster's record (as the server does at
// its first start) with cs.HistoryShards, or checks the stored one: the
// server itself would silently use the stored count.
func ensureClusterMetadata(ctx context.Context, cs ClusterStore, st stores, logger log.Logger) error {
	mgr, done, err := clusterMetadataManager(st, logger)
	if err != nil {
		return err
	}
	defer done()
	got, err := mgr.GetClusterMetadata(ctx, &persistence.GetClusterMetadataRequest{ClusterName: ClusterName})
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		if got.HistoryShardCount != cs.HistoryShards {
			return errs.New(errs.InvalidState,
				"the Temporal database holds %d history shards, set at its first set-up; --history-shards %d cannot change it (give %d)",
				got.HistoryShardCount, cs.HistoryShards, got.HistoryShardCount)
		}
		return nil
	case !errors.As(err, &notFound):
		return errs.Wrap(errs.Unavailable, err, "cannot read the cluster metadata")
	}
	_, err = mgr.SaveClusterMetadata(ctx, &persistence.SaveClusterMetadataRequest{ClusterMetadata: clusterRecord(cs, st)})
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot store the cluster metadata")
	}
	return nil
}

// clusterMetadataManager opens the cluster metadata of st; done closes it.
func clusterMetadataManager(st stores, logger log.Logger) (mgr persistence.ClusterMetadataManager, done func(), err error) {
	ser := serialization.NewSerializer()
	f := tsql.NewFactory(*st.main, resolver.NewNoopResolver(), ClusterName, logger, metrics.NoopMetricsHandler, ser)
	store, err := f.NewClusterMetadataStore()
	if err != nil {
		f.Close()
		return nil, nil, errs.Wrap(errs.Unavailable, err, "cannot open the cluster metadata")
	}
	return persistence.NewClusterMetadataManagerImpl(store, ser, ClusterName, logger), f.Close, nil
}

// clusterRecord is the record the server would write at its first start
// (temporal/fx.go initCurrentClusterMetadataRecord) for serverConfig's
// cluster on these stores; written here so that processes starting at once
// find it and none of them rewrites it: each would, with the one it read,
// and all but the first then fail to start (a version mismatch). Its index
// search attributes are keyed, as the server keys them, by the index of the
// visibility store and of the secondary one (none: "").
func clusterRecord(cs ClusterStore, st stores) *persistencespb.ClusterMetadata {
	p := clusterServerConfig(ClusterConfig{Store: cs}, st).Persistence
	index := map[string]*persistencespb.IndexSearchAttributes{}
	for _, ds := range []config.DataStore{p.GetVisibilityStoreConfig(), p.GetSecondaryVisibilityStoreConfig()} {
		index[ds.GetIndexName()] = sadefs.GetDBIndexSearchAttributes(nil)
	}
	return &persistencespb.ClusterMetadata{
		HistoryShardCount:        cs.HistoryShards,
		ClusterName:              ClusterName,
		ClusterId:                ClusterID,
		ClusterAddress:           cs.FrontendAddress,
		FailoverVersionIncrement: failoverVersionIncrement,
		InitialFailoverVersion:   initialFailoverVersion,
		IsConnectionEnabled:      true,
		UseClusterIdMembership:   true,
		IndexSearchAttributes:    index,
	}
}

// createClusterNamespace creates the namespace with the search attributes
// in the database, before any frontend caches its absence. The helper is in
// Temporal's sqlite schema package but writes through any SQL plugin.
func createClusterNamespace(sc *config.SQL, namespace string) error {
	if namespace == "" {
		namespace = "default"
	}
	ns, err := sqliteschema.NewNamespaceConfig(ClusterName, namespace, false, searchattrs.SearchAttributes())
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot build namespace %q", namespace)
	}
	if err := sqliteschema.CreateNamespaces(sc, ns); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot create namespace %q", namespace)
	}
	return nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

func levelVar(l slog.Level) *slog.LevelVar {
	v := new(slog.LevelVar)
	v.Set(l)
	return v
}
