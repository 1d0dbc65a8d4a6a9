package tserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	tokenspb "go.temporal.io/server/api/token/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"
	"google.golang.org/grpc/credentials"

	"github.com/better-compute/better-compute/pki"
)

func TestClaimMapper(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := pki.Init(dir+"/a", "a.test")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Init(dir+"/b", "b.test")
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(ca *pki.CA, role pki.Role, id string) *credentials.TLSInfo {
		certPEM, _ := issue(t, ca, role, id)
		cert, err := pki.ParseCert(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert, ca.Certificate()}}}}
	}
	tests := []struct {
		name string
		conn *credentials.TLSInfo
		want *authorization.Claims // nil: an error
	}{
		{"control plane", leaf(ca, pki.RoleControlPlane, "control-plane"), &authorization.Claims{Subject: "control-plane/control-plane",
			System: authorization.RoleAdmin, AuthType: "mtls", Extensions: peer{pki.RoleControlPlane, "control-plane"}}},
		{"site", leaf(ca, pki.RoleSite, "site_a"), &authorization.Claims{Subject: "site/site_a",
			AuthType: "mtls", Extensions: peer{pki.RoleSite, "site_a"}}},
		{"another trust domain", leaf(other, pki.RoleControlPlane, "control-plane"), nil},
		{"no TLS", nil, nil},
		{"unverified", &credentials.TLSInfo{}, nil},
	}
	m := claimMapper{trustDomain: "a.test"}
	for _, tt := range tests {
		got, err := m.GetClaims(&authorization.AuthInfo{TLSConnection: tt.conn})
		if tt.want == nil {
			if err == nil {
				t.Errorf("GetClaims(%s) = %+v, want an error", tt.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("GetClaims(%s) = %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(peer{})); diff != "" {
			t.Errorf("GetClaims(%s) (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestAuthorizer(t *testing.T) {
	t.Parallel()
	const ns, own = "bc", "site/site_a"
	claims := func(role pki.Role, id string) *authorization.Claims {
		return &authorization.Claims{Extensions: peer{role, id}}
	}
	cp, site := claims(pki.RoleControlPlane, "control-plane"), claims(pki.RoleSite, "site_a")
	token := func(tk *tokenspb.Task) []byte {
		b, err := tasktoken.NewSerializer().Serialize(tk)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	polled := token(&tokenspb.Task{RunId: "0b1c", ScheduledEventId: 5, WorkflowId: "wf", ActivityId: "step"})
	noRun := token(&tokenspb.Task{ScheduledEventId: 5, WorkflowId: "wf", ActivityId: "step"})
	poll := func(name string) any {
		return &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: name}}
	}
	sticky := func(normal string) any {
		return &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{
			Name: "host:5e1f", Kind: enumspb.TASK_QUEUE_KIND_STICKY, NormalName: normal}}
	}
	tests := []struct {
		name   string
		claims *authorization.Claims
		api    string
		nsName string
		req    any
		want   bool
	}{
		{"health check without claims", nil, "/grpc.health.v1.Health/Check", "", nil, true},
		{"no claims", nil, "GetSystemInfo", "", nil, false},
		{"control plane starts a workflow", cp, "StartWorkflowExecution", ns, nil, true},
		{"control plane reads the admin API", cp, "/temporal.server.api.adminservice.v1.AdminService/DescribeCluster", "", nil, true},
		{"site system info", site, "GetSystemInfo", "", nil, true},
		{"site describes its namespace", site, "DescribeNamespace", ns, nil, true},
		{"site describes another namespace", site, "DescribeNamespace", "temporal-system", nil, false},
		{"site polls its queue", site, "PollActivityTaskQueue", ns, poll(own), true},
		{"site polls another queue", site, "PollActivityTaskQueue", ns, poll("site/site_b"), false},
		{"site polls the control plane's queue", site, "PollActivityTaskQueue", ns, poll("control-plane"), false},
		{"site polls its sticky queue", site, "PollWorkflowTaskQueue", ns, sticky(own), true},
		{"site polls another's sticky queue", site, "PollWorkflowTaskQueue", ns, sticky("control-plane"), false},
		{"site answers a workflow task", site, "RespondWorkflowTaskCompleted", ns, nil, false},
		{"site completes with a real token", site, "RespondActivityTaskCompleted", ns,
			&workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: polled}, true},
		{"site heartbeats with a real token", site, "RecordActivityTaskHeartbeat", ns,
			&workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: ns, TaskToken: polled}, true},
		{"site fails with a token naming no run", site, "RespondActivityTaskFailed", ns,
			&workflowservice.RespondActivityTaskFailedRequest{Namespace: ns, TaskToken: noRun}, false},
		{"site completes with garbage", site, "RespondActivityTaskCompleted", ns,
			&workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: []byte{0xff, 0x01}}, false},
		{"site completes by ID", site, "RespondActivityTaskCompletedById", ns, nil, false},
		{"site shuts its worker down", site, "ShutdownWorker", ns,
			&workflowservice.ShutdownWorkerRequest{Namespace: ns, TaskQueue: own}, true},
		{"site shuts another queue's pollers down", site, "ShutdownWorker", ns,
			&workflowservice.ShutdownWorkerRequest{Namespace: ns, TaskQueue: "control-plane"}, false},
		{"site starts a workflow", site, "StartWorkflowExecution", ns, nil, false},
		{"site signals a workflow", site, "SignalWorkflowExecution", ns, nil, false},
		{"site calls the operator API", site, "/temporal.api.operatorservice.v1.OperatorService/ListSearchAttributes", ns, nil, false},
		{"ramdisk", claims(pki.RoleRamdisk, "node_a"), "GetSystemInfo", "", nil, false},
		{"node", claims(pki.RoleNode, "node_a"), "DescribeNamespace", ns, nil, false},
		{"claims of someone else's mapper", &authorization.Claims{System: authorization.RoleAdmin}, "GetSystemInfo", "", nil, false},
	}
	a := newAuthorizer(ns, slog.New(slog.DiscardHandler))
	for _, tt := range tests {
		api := tt.api
		if api[0] != '/' {
			api = workflowService + api
		}
		res, err := a.Authorize(context.Background(), tt.claims, &authorization.CallTarget{APIName: api, Namespace: tt.nsName, Request: tt.req})
		if got := res.Decision == authorization.DecisionAllow; err != nil || got != tt.want {
			t.Errorf("Authorize(%s) = %v, %v; want allowed %v", tt.name, got, err, tt.want)
		}
	}
}
