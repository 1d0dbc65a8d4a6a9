// Package autoinstall is the spec's walkthrough "Ubuntu autoinstall over
// virtual media" as a third-party plugin: a module of its own that imports
// better-compute's public packages only (sdk, sdk/iso, provision, errs)
// and changes none of them.
//
// Its step autoinstall.renderIso, on the control plane, issues a single-use
// provisioned join token, renders the autoinstall user data holding it,
// writes it into a per-node cidata ISO and publishes that behind the node's
// site at an unguessable URL, which it returns as its output url. The
// profile ubuntu-24.04-autoinstall mounts that ISO through the BMC's
// virtual media (media.insert with fromStep), boots the machine from it,
// waits for the installed machine's bcd node to join, and ejects the ISO.
// The token travels only inside the ISO: never in an output, a log or a
// command.
package autoinstall

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/sdk/iso"
)

// Ids this plugin declares.
const (
	PluginID  = "acme-autoinstall"
	StepID    = "autoinstall.renderIso"
	ProfileID = "ubuntu-24.04-autoinstall"
)

// TokenTTL bounds the join token and the published ISO: the install must
// have joined by then.
const TokenTTL = 2 * time.Hour

// UserData is the autoinstall configuration, as the spec gives it: the
// installer writes the join token where bcd node reads it and enables bcd.
const UserData = `#cloud-config
autoinstall:
  version: 1
  identity: { hostname: {{hostname}} }
  late-commands:
    - curtin in-target -- sh -c "echo {{joinToken}} > /etc/bcd/join-token && chmod 600 /etc/bcd/join-token"
    - curtin in-target -- systemctl enable bcd
`

// Plugin is what a worker takes (controlplane.Config.Plugins).
func Plugin() sdk.Plugin {
	return sdk.Plugin{ID: PluginID, Steps: []sdk.Step{RenderIso()}, Profiles: []provision.Profile{Profile()}}
}

// RenderIso is the step autoinstall.renderIso.
func RenderIso() sdk.Step {
	return sdk.Step{
		ID: StepID, RunsOn: sdk.ControlPlane, Timeout: 5 * time.Minute,
		// Each run issues another token; running it again on a machine that
		// already booted the last ISO would strand that install's token.
		RetrySafe: false,
		Input:     sdk.Manifest{},
		Outputs:   []string{"url"},
		Doc:       "renders the node's autoinstall user data with a single-use join token into a cidata ISO published behind its site",
		Run:       renderIso,
	}
}

// Profile is ubuntu-24.04-autoinstall v1, the spec's six steps.
func Profile() provision.Profile {
	return provision.Profile{ID: ProfileID, Version: 1, Target: "metal", Role: "host", Steps: []provision.Step{
		{Use: StepID},
		{Use: "media.insert", On: "site", With: map[string]any{sdk.FromStepKey: StepID}},
		{Use: "management.setBootDevice", On: "site", With: map[string]any{"device": "cd"}},
		{Use: "power.setPower", On: "site", With: map[string]any{"action": "cycle"}},
		{Use: "wait.agentJoined", With: map[string]any{"role": "node"}},
		{Use: "media.eject", On: "site"},
	}}
}

// renderIso issues the token, renders the ISO and publishes it in one
// transaction: a token exists only with the ISO that carries it.
func renderIso(ctx context.Context, c *sdk.Context, _ sdk.Values) (sdk.Values, error) {
	if c.SQL == nil || c.PKI == nil || c.Artifacts == nil {
		return nil, errs.New(errs.Unsupported, "%s runs on the control plane, whose worker gives it SQL, PKI and Artifacts", StepID)
	}
	var url string
	err := c.SQL.Transaction(ctx, func(tx pgx.Tx) error {
		tok, err := c.PKI.IssueJoinToken(ctx, tx, c.Node, sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, TTL: TokenTTL, MaxUses: 1})
		if err != nil {
			return fmt.Errorf("issue the provisioned join token: %w", err)
		}
		img, err := ISO(c.Node.ID, tok.Token)
		if err != nil {
			return err
		}
		url, err = c.Artifacts.Publish(ctx, tx, c.Node, "autoinstall.iso", img, TokenTTL)
		if err != nil {
			return fmt.Errorf("publish the autoinstall ISO: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sdk.Values{"url": url}, nil
}

// ISO renders the cidata ISO of node nodeID: user-data holding token and
// meta-data naming the instance.
func ISO(nodeID string, token sdk.Secret) ([]byte, error) {
	host := Hostname(nodeID)
	userData, err := sdk.RenderTemplate(UserData, map[string]string{"hostname": host, "joinToken": string(token)})
	if err != nil {
		return nil, err // names the missing placeholder, never a value
	}
	metaData := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", nodeID, host)
	var buf bytes.Buffer
	if err := iso.Write(&buf, "cidata", map[string][]byte{"user-data": []byte(userData), "meta-data": []byte(metaData)}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Hostname is the installed machine's host name: the node id with its
// underscores made hyphens (a host name has none).
func Hostname(nodeID string) string { return strings.ReplaceAll(nodeID, "_", "-") }
