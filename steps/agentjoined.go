package steps

import (
	"context"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
)

// WaitAgentJoined is the step that waits for an installed OS's bcd node.
const WaitAgentJoined = "wait.agentJoined"

// Timing of wait.agentJoined: an OS install's length, polled.
const (
	AgentJoinedTimeout = 30 * time.Minute
	agentJoinedPoll    = 5 * time.Second
)

func agentJoined() sdk.Step {
	return sdk.Step{ID: WaitAgentJoined, RunsOn: sdk.ControlPlane, Timeout: AgentJoinedTimeout, RetrySafe: true,
		Doc: "waits until the installed OS's bcd node joined: a certificate of the role issued to the node since the run started",
		Input: sdk.Manifest{{Name: "role", Type: sdk.String, Default: "node", Enum: []string{"node"},
			Doc: "the role the agent joins with (bcd node: node)"}},
		Outputs: []string{"joinedAt", "serial"},
		Run:     runAgentJoined,
	}
}

// runAgentJoined is NotReady until the node's agent joined in this run: a
// certificate of the role issued by a join (not a renewal, not revoked) to
// the node at or after the run's first command. A certificate from before
// the run (the node's previous OS) does not count.
func runAgentJoined(ctx context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
	rows, err := c.SQL.Query(ctx, `
		SELECT c.serial, c.issued_at FROM certificates c
		WHERE c.tenant_id = $1 AND c.identity = $2 AND c.role = $3 AND c.token_id <> 'renewal'
			AND c.revoked_at IS NULL
			AND c.issued_at >= (SELECT min(started_at) FROM commands WHERE workflow_id = $4 AND run_id = $5)
		ORDER BY c.issued_at DESC LIMIT 1`,
		c.Node.TenantID, c.Node.ID, in.String("role"), c.WorkflowID, c.RunID)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot read the node's certificates")
	}
	defer rows.Close()
	var serial string
	var at time.Time
	found := rows.Next()
	if found {
		err = rows.Scan(&serial, &at)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot read the node's certificates")
	}
	if !found {
		return nil, sdk.NotReady(agentJoinedPoll)
	}
	return sdk.Values{"joinedAt": at.UTC().Format(time.RFC3339Nano), "serial": serial}, nil
}
