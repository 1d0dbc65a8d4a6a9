package controlplane_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

func TestGetNode(t *testing.T) {
	f := newFixture(t, "none", store.PoolPolicy{AllowUnverifiedRelease: true})
	node := f.newNode(t, "d1")
	got, err := f.act.GetNode(t.Context(), kinds.NodeRef{TenantID: f.tenant, NodeID: node})
	if err != nil {
		t.Fatalf("GetNode = %v", err)
	}
	want := kinds.NodeInfo{TenantID: f.tenant, NodeID: node, SiteID: f.site, PoolID: f.pool, State: nodestate.Enrolling,
		BMC: kinds.BMCTarget{NodeID: node, Address: "https://bmc-" + node + ".test/redfish/v1/Systems/1", Driver: "redfish",
			CredentialsRef: "env://BMC"},
		MACs: []string{"52:54:00:00:00:01"}, Disks: []string{"d1"}, Agent: "none", AllowUnverifiedRelease: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetNode (-want +got):\n%s", diff)
	}
	_, err = f.act.GetNode(t.Context(), kinds.NodeRef{TenantID: "other", NodeID: node})
	if k := errs.FromTemporal(err); k != errs.NotFound {
		t.Errorf("GetNode(another tenant) = %v, want NOT_FOUND", err)
	}
}

func TestTransition(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	cases := []struct {
		name  string
		moves []kinds.TransitionInput // From/To only; the last one is checked
		want  errs.Kind               // "" for success
		state nodestate.State
	}{
		{name: "along the table", moves: []kinds.TransitionInput{{From: "enrolling", To: "inspecting"}}, state: "inspecting"},
		{name: "not in the table", moves: []kinds.TransitionInput{{From: "enrolling", To: "deployed"}}, want: errs.InvalidState, state: "enrolling"},
		{name: "compare-and-set", moves: []kinds.TransitionInput{{From: "inspecting", To: "ready"}}, want: errs.InvalidState, state: "enrolling"},
		{name: "repeated move is a no-op", moves: []kinds.TransitionInput{{From: "enrolling", To: "inspecting"}, {From: "enrolling", To: "inspecting"}}, state: "inspecting"},
		{name: "failed records where from", moves: []kinds.TransitionInput{{From: "enrolling", To: "inspecting"},
			{From: "inspecting", To: "failed", Error: "UNVERIFIED_WIPE: d2", Maintenance: true}}, state: "failed"},
		{name: "resting state cannot fail", moves: []kinds.TransitionInput{{From: "enrolling", To: "inspecting"}, {From: "inspecting", To: "manageable"},
			{From: "manageable", To: "failed"}}, want: errs.InvalidState, state: "manageable"},
		{name: "no ready without an attested wipe", moves: []kinds.TransitionInput{{From: "enrolling", To: "inspecting"},
			{From: "inspecting", To: "ready", WorkflowID: "wf", RunID: "run"}}, want: errs.UnverifiedWipe, state: "inspecting"},
		{name: "no exception the pool does not allow", moves: []kinds.TransitionInput{{From: "enrolling", To: "inspecting"},
			{From: "inspecting", To: "ready", WorkflowID: "wf", RunID: "run", Exception: kinds.ExceptionUnverifiedRelease}},
			want: errs.UnverifiedWipe, state: "inspecting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node := f.newNode(t)
			var err error
			for _, m := range tc.moves {
				m.TenantID, m.NodeID = f.tenant, node
				err = f.act.Transition(t.Context(), m)
			}
			if got := errs.FromTemporal(err); err != nil && got != tc.want || err == nil && tc.want != "" {
				t.Fatalf("Transition(%v) = %v, want kind %q", tc.moves[len(tc.moves)-1], err, tc.want)
			}
			var app *temporal.ApplicationError
			if err != nil && !errors.As(err, &app) {
				t.Errorf("Transition error %v is not a Temporal application error", err)
			}
			n, _ := f.s.GetNode(t.Context(), f.tenant, node)
			if n.State != tc.state {
				t.Errorf("state after %s = %s, want %s", tc.name, n.State, tc.state)
			}
			if last := tc.moves[len(tc.moves)-1]; last.To == nodestate.Failed && tc.want == "" {
				if n.FailedFrom != last.From || n.LastError != last.Error || n.Maintenance != last.Maintenance ||
					n.MaintenanceReason != last.Error {
					t.Errorf("failed node = failedFrom %s lastError %q maintenance %v (%q), want %s, %q, %v",
						n.FailedFrom, n.LastError, n.Maintenance, n.MaintenanceReason, last.From, last.Error, last.Maintenance)
				}
			}
		})
	}
}

func TestIssueDiscoveryTokenIsSingleUse(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t)
	in := kinds.DiscoveryInput{TenantID: f.tenant, SiteID: f.site, NodeID: node, WorkflowID: "metal/" + node}
	tok, err := f.act.IssueDiscoveryToken(t.Context(), in)
	if err != nil {
		t.Fatalf("IssueDiscoveryToken = %v", err)
	}
	again, _ := f.act.IssueDiscoveryToken(t.Context(), in)
	if !strings.HasPrefix(tok, "bcdisc_") || tok == again {
		t.Errorf("IssueDiscoveryToken = %q then %q, want two distinct bcdisc_ tokens", tok[:8], again[:8])
	}
	jt, err := f.s.ConsumeJoinToken(t.Context(), pki.HashToken(tok), string(pki.TokenDiscovery), "", f.now, spendToken)
	if err != nil {
		t.Fatalf("ConsumeJoinToken(fresh) = %v", err)
	}
	if jt.NodeID != node || jt.SiteID != f.site || jt.WorkflowID != in.WorkflowID || !jt.ExpiresAt.Equal(f.now.Add(controlplane.DiscoveryTTL)) {
		t.Errorf("token = %+v, want node %s site %s workflow %s, expiring %s", jt, node, f.site, in.WorkflowID, f.now.Add(controlplane.DiscoveryTTL))
	}
	if _, err := f.s.ConsumeJoinToken(t.Context(), pki.HashToken(tok), string(pki.TokenDiscovery), "", f.now, spendToken); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("ConsumeJoinToken(used) = %v, want UNAUTHENTICATED", err)
	}
}

// TestStartCommandRecordsThePreviousOutcome: command.start carrying the
// run's previous command's outcome records both: the previous one finished
// as it says, the new one sent.
func TestStartCommandRecordsThePreviousOutcome(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t, "d1")
	rec := func(step, kind string) kinds.CommandRecord {
		return kinds.CommandRecord{TenantID: f.tenant, NodeID: node, SiteID: f.site, Kind: kind, RunsOn: "site",
			WorkflowID: "metal/" + node, RunID: "r1", Step: step}
	}
	first := rec("01.boot.setEntry", kinds.BootSetEntry)
	if err := f.act.StartCommand(t.Context(), first); err != nil {
		t.Fatalf("StartCommand(%s) = %v", first.Step, err)
	}
	done := first
	done.Status, done.Attempt = kinds.CommandSucceeded, 1
	next := rec("02.power.setPower", kinds.PowerSetPower)
	next.Previous = &done
	if err := f.act.StartCommand(t.Context(), next); err != nil {
		t.Fatalf("StartCommand(%s after %s) = %v", next.Step, first.Step, err)
	}
	cmds, err := f.s.ListCommands(t.Context(), f.tenant, node)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cmds {
		got[c.Step] = c.Status
	}
	want := map[string]string{first.Step: kinds.CommandSucceeded, next.Step: kinds.CommandSent}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("command log (-want +got):\n%s", diff)
	}
}

// spendToken is a certify for ConsumeJoinToken in tests that spend a token
// and look only at the token: a certificate of a serial of its own.
func spendToken(t store.JoinToken) (store.Certificate, error) {
	return store.Certificate{Serial: "test-" + t.ID, TenantID: t.TenantID, Role: "ramdisk", Identity: t.NodeID,
		SiteID: t.SiteID, TokenID: t.ID, PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: t.ExpiresAt}, nil
}
