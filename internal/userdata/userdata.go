// Package userdata renders a deploy profile's user data: deploy.image's
// with.userDataRef names a tenant's secret (secret://TENANT/NAME) whose
// userData value is a template; it is rendered on the control plane with
// the node's facts and, when it uses {{joinToken}}, a fresh single-use
// provisioned token, into a cloud-init NoCloud seed (a cidata ISO) that the
// node's site serves to its ramdisk only. The API checks a reference before
// a node moves (Check), the control plane renders it (Seed).
package userdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/sdk/iso"
)

// Field is the deploy.image input that names the user data.
const Field = "userDataRef"

// Key is the key of a secret's value that holds a user-data template.
const Key = "userData"

// SeedName is the artifact the rendered seed is published as.
const SeedName = "cidata.iso"

// The placeholders a template may use.
const (
	Hostname  = "hostname"
	NodeID    = "nodeId"
	SiteID    = "siteId"
	TenantID  = "tenantId"
	MACs      = "macs" // comma-separated
	JoinToken = "joinToken"
)

// refPattern is secret://TENANT/NAME with the API's tenant and secret name
// rules (api/validate.go).
var (
	refPattern   = regexp.MustCompile(`^secret://([a-z][a-z0-9-]{1,62})/([a-z0-9][a-z0-9-]{0,62})$`)
	tokenPattern = regexp.MustCompile(`{{\s*` + JoinToken + `\s*}}`)
)

// ParseRef parses secret://TENANT/NAME, which must be of owner, the
// profile's tenant: a profile renders only its owner's secrets, so a
// public profile shares its user data, never another tenant's secret.
func ParseRef(field, ref, owner string) (name string, err error) {
	m := refPattern.FindStringSubmatch(ref)
	switch {
	case m == nil:
		return "", errs.Invalid(field, "want secret://<tenant>/<name> naming the secret that holds the user-data template, got %q", ref)
	case m[1] != owner:
		return "", errs.Invalid(field, "the user data must be a secret of the profile's tenant %s, got one of %s", owner, m[1])
	}
	return m[2], nil
}

// Template is the user-data template a secret's value (a JSON object of
// strings, as the API stores secrets) holds under Key.
func Template(field string, value []byte) (string, error) {
	var v map[string]string
	if json.Unmarshal(value, &v) != nil || v[Key] == "" {
		return "", errs.Invalid(field, "the secret holds no %s template (secrets put NAME with {\"%s\": \"<template>\"})", Key, Key)
	}
	return v[Key], nil
}

// Facts are what a template is rendered with.
type Facts struct {
	NodeID, SiteID, TenantID string
	MACs                     []string
}

// Host is the node's host name: its id with underscores made hyphens.
func Host(nodeID string) string { return strings.ReplaceAll(nodeID, "_", "-") }

// UsesToken says whether the template asks for a join token.
func UsesToken(tmpl string) bool {
	return tokenPattern.MatchString(tmpl)
}

// Render renders tmpl with f and token ("" when the template uses none).
// Its error names the placeholders it lacks, never a value.
func Render(field, tmpl string, f Facts, token sdk.Secret) (string, error) {
	data := map[string]string{Hostname: Host(f.NodeID), NodeID: f.NodeID, SiteID: f.SiteID,
		TenantID: f.TenantID, MACs: strings.Join(f.MACs, ",")}
	if UsesToken(tmpl) {
		data[JoinToken] = string(token)
	}
	out, err := sdk.RenderTemplate(tmpl, data)
	if err != nil {
		return "", errs.Invalid(field, "the user-data template does not render: %v (it may use %s)", err, strings.Join(Names(), ", "))
	}
	return out, nil
}

// Names are the placeholders a template may use.
func Names() []string { return []string{Hostname, NodeID, SiteID, TenantID, MACs, JoinToken} }

// Check says whether tmpl renders, with stand-in facts, before a node
// moves: the names a template uses are the same whatever the node.
func Check(field, tmpl string) error {
	_, err := Render(field, tmpl, Facts{NodeID: "node_check", SiteID: "site_check", TenantID: "check"}, "check")
	return err
}

// Seed is the NoCloud seed of rendered user data: a cidata ISO holding
// user-data and meta-data (the instance id is the node and the run, so a
// redeploy runs cloud-init again).
func Seed(userData string, f Facts, instance string) ([]byte, error) {
	meta := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", instance, Host(f.NodeID))
	var buf bytes.Buffer
	err := iso.Write(&buf, "cidata", map[string][]byte{"user-data": []byte(userData), "meta-data": []byte(meta)})
	return buf.Bytes(), err
}
