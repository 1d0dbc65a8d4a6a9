package tserver

import (
	"context"
	"log/slog"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
)

// peer is who called, read from the verified client certificate; it rides
// in Claims.Extensions.
type peer struct {
	role     pki.Role
	identity string
}

// claimMapper turns the verified client certificate's SPIFFE ID into claims:
// a control-plane certificate is a system admin, any other known role gets
// no Temporal role and only what authorizer grants it by name.
type claimMapper struct{ trustDomain string }

var _ authorization.ClaimMapper = claimMapper{}

// GetClaims fails for a connection without a verified certificate of the
// trust domain: the interceptor then refuses the call.
func (m claimMapper) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	cert := authorization.PeerCert(info.TLSConnection)
	if cert == nil {
		return nil, errs.New(errs.Unauthenticated, "no verified client certificate")
	}
	role, id, err := pki.Identify(cert, m.trustDomain)
	if err != nil {
		return nil, err
	}
	c := &authorization.Claims{Subject: string(role) + "/" + id, AuthType: "mtls", Extensions: peer{role, id}}
	if role == pki.RoleControlPlane {
		c.System = authorization.RoleAdmin
	}
	return c, nil
}

// authorizer lets a control-plane certificate do everything and a site's
// certificate only what a worker of its own site's task queue needs, in the
// server's namespace. Everything else, and every call without claims, is
// denied.
type authorizer struct {
	namespace string
	log       *slog.Logger
	tokens    *tasktoken.Serializer
	site      map[string]func(queue string, req any) bool // by WorkflowService method
}

var _ authorization.Authorizer = (*authorizer)(nil)

func newAuthorizer(namespace string, log *slog.Logger) *authorizer {
	a := &authorizer{namespace: namespace, log: log, tokens: tasktoken.NewSerializer()}
	a.site = a.siteCalls()
	return a
}

var (
	allow = authorization.Result{Decision: authorization.DecisionAllow}
	deny  = authorization.Result{Decision: authorization.DecisionDeny}
)

const workflowService = "/temporal.api.workflowservice.v1.WorkflowService/"

// siteCalls are the WorkflowService methods a site agent's activity worker
// calls, each with the check of its request against the caller's own task
// queue. The *ById completions are absent on purpose: they name any
// workflow's activity without a task token.
func (a *authorizer) siteCalls() map[string]func(queue string, req any) bool {
	always := func(string, any) bool { return true }
	token := func(_ string, req any) bool { return a.realToken(req) }
	return map[string]func(string, any) bool{
		"GetSystemInfo":     always,
		"DescribeNamespace": always,
		"PollActivityTaskQueue": func(q string, req any) bool {
			r, ok := req.(*workflowservice.PollActivityTaskQueueRequest)
			return ok && r.GetTaskQueue().GetName() == q
		},
		// The SDK's worker polls workflow tasks too, on the queue and on its
		// sticky queue, even with no workflow registered; a site may poll
		// but never answer one (RespondWorkflowTask* is absent).
		"PollWorkflowTaskQueue": func(q string, req any) bool {
			r, ok := req.(*workflowservice.PollWorkflowTaskQueueRequest)
			return ok && ownQueue(r.GetTaskQueue(), q)
		},
		"RespondActivityTaskCompleted": token,
		"RespondActivityTaskFailed":    token,
		"RespondActivityTaskCanceled":  token,
		"RecordActivityTaskHeartbeat":  token,
		"ShutdownWorker": func(q string, req any) bool {
			r, ok := req.(*workflowservice.ShutdownWorkerRequest)
			return ok && (r.GetTaskQueue() == "" || r.GetTaskQueue() == q)
		},
		"RecordWorkerHeartbeat": always,
	}
}

// ownQueue reports whether tq is the queue q or a worker's sticky queue
// for q.
func ownQueue(tq *taskqueuepb.TaskQueue, q string) bool {
	if tq.GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
		return tq.GetNormalName() == q
	}
	return tq.GetName() == q
}

// tokenRequest is a request that answers an activity task by its token.
type tokenRequest interface{ GetTaskToken() []byte }

// realToken checks that a task token is shaped like one a poll hands out:
// it names its run and scheduled event. Tokens are not signed, so this does
// not prove the caller polled it; it makes a forger guess a run ID (a random
// UUID that only the run's own task queue's workers see) instead of
// letting the server look up the workflow's current run.
func (a *authorizer) realToken(req any) bool {
	r, ok := req.(tokenRequest)
	if !ok {
		return false
	}
	t, err := a.tokens.Deserialize(r.GetTaskToken())
	return err == nil && t.GetRunId() != "" && t.GetScheduledEventId() > 0
}

// Authorize decides one call.
func (a *authorizer) Authorize(ctx context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	if target.APIName == healthpb.Health_Check_FullMethodName {
		return allow, nil
	}
	if claims == nil {
		return deny, nil
	}
	p, ok := claims.Extensions.(peer)
	if !ok {
		return deny, nil
	}
	if p.role == pki.RoleControlPlane {
		return allow, nil
	}
	if p.role == pki.RoleSite && a.siteMay(p.identity, target) {
		return allow, nil
	}
	a.log.WarnContext(ctx, "temporal call denied", "role", p.role, "identity", p.identity,
		"api", target.APIName, "namespace", target.Namespace, "taskQueue", taskQueueOf(target.Request))
	return deny, nil
}

func (a *authorizer) siteMay(site string, target *authorization.CallTarget) bool {
	method, ok := strings.CutPrefix(target.APIName, workflowService)
	if !ok || target.Namespace != a.namespace && method != "GetSystemInfo" {
		return false
	}
	check, ok := a.site[method]
	return ok && check(kinds.SiteTaskQueue(site), target.Request)
}

// taskQueueOf names the task queue a request is about, for the log.
func taskQueueOf(req any) string {
	switch r := req.(type) {
	case interface{ GetTaskQueue() *taskqueuepb.TaskQueue }:
		return r.GetTaskQueue().GetName()
	case interface{ GetTaskQueue() string }:
		return r.GetTaskQueue()
	}
	return ""
}
