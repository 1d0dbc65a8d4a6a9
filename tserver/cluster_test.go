package tserver

import (
	"context"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

// TestClusterRefusesBadInput: each bad flag is INVALID_INPUT naming it,
// found before anything connects or binds (the database URL points
// nowhere: reaching it would be UNAVAILABLE instead).
func TestClusterRefusesBadInput(t *testing.T) {
	store := ClusterStore{DatabaseURL: "postgres://u:secret-pw@127.0.0.1:1/temporal", HistoryShards: 4}
	good := map[string]ServiceAddr{"frontend": {Listen: "127.0.0.1:0", MembershipPort: 26930}}
	cases := []struct {
		name, field string
		cfg         ClusterConfig
	}{
		{"unknown service", "services", ClusterConfig{Store: store, Services: []string{"web"}, Addrs: good}},
		{"no listener", "history-listen", ClusterConfig{Store: store, Services: []string{"history"}, Addrs: good}},
		{"listener not ip:port", "frontend-listen", ClusterConfig{Store: store, Services: []string{"frontend"},
			Addrs: map[string]ServiceAddr{"frontend": {Listen: "localhost", MembershipPort: 6933}}}},
		{"membership port over a smallint", "frontend-membership-port", ClusterConfig{Store: store, Services: []string{"frontend"},
			Addrs: map[string]ServiceAddr{"frontend": {Listen: "127.0.0.1:0", MembershipPort: 40000}}}},
		{"wildcard without broadcast", "broadcast-address", ClusterConfig{Store: store, Services: []string{"frontend"},
			Addrs: map[string]ServiceAddr{"frontend": {Listen: "0.0.0.0:0", MembershipPort: 26933}}}},
		{"broadcast not an IP", "broadcast-address", ClusterConfig{Store: store, Services: []string{"frontend"}, BroadcastAddress: "db.example",
			Addrs: map[string]ServiceAddr{"frontend": {Listen: "127.0.0.1:0", MembershipPort: 26934}}}},
		{"no database", "database-url", ClusterConfig{Store: ClusterStore{HistoryShards: 4}, Services: []string{"frontend"},
			Addrs: map[string]ServiceAddr{"frontend": {Listen: "127.0.0.1:0", MembershipPort: 26935}}}},
		{"database not postgres", "database-url", ClusterConfig{Store: ClusterStore{DatabaseURL: "mysql://h/t", HistoryShards: 4},
			Services: []string{"frontend"}, Addrs: map[string]ServiceAddr{"frontend": {Listen: "127.0.0.1:0", MembershipPort: 26936}}}},
		{"no shards", "history-shards", ClusterConfig{Store: ClusterStore{DatabaseURL: store.DatabaseURL}, Services: []string{"frontend"},
			Addrs: map[string]ServiceAddr{"frontend": {Listen: "127.0.0.1:0", MembershipPort: 26937}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := StartCluster(context.Background(), tc.cfg)
			if !errs.Is(err, errs.InvalidInput) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("StartCluster = %v, want INVALID_INPUT naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "secret-pw") {
				t.Errorf("StartCluster = %v: the database password is in the error", err)
			}
		})
	}
}

// TestSQLStores: the URL's parts land in Temporal's SQL config, a Unix
// socket (host= in the query) included, and visibility is <db>_visibility.
func TestSQLStores(t *testing.T) {
	st, err := sqlStores(ClusterStore{DatabaseURL: "postgres:///temporal?host=%2Frun%2Fpg&user=postgres&sslmode=disable", MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	m, v := st.main, st.visibility
	if m.DatabaseName != "temporal" || v.DatabaseName != "temporal_visibility" || m.ConnectAttributes["host"] != "/run/pg" ||
		m.ConnectAttributes["sslmode"] != "disable" || m.MaxConns != 8 || v.MaxConns != 4 {
		t.Errorf("sqlStores = main %+v, visibility %+v; want temporal and temporal_visibility over /run/pg, 8 and 4 connections", m, v)
	}
	st, err = sqlStores(ClusterStore{DatabaseURL: "postgres://tu:pw@db.example/t"})
	if err != nil {
		t.Fatal(err)
	}
	if st.main.ConnectAddr != "db.example:5432" || st.main.User != "tu" || st.main.Password != "pw" || st.main.MaxConns != 20 {
		t.Errorf("sqlStores = %+v, want db.example:5432 as tu, 20 connections", st.main)
	}
}
