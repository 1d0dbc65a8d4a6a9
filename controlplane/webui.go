package controlplane

import (
	"net"
	"net/http"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/webui"
)

// newGate makes the Web UI's gate: the control plane's login in front of
// the UI and of the codec endpoints (one served on the UI's origin, the
// API's /codec/ guarded by the same session). Sessions are signed with a key
// derived from the payload key, which every serve over this database holds,
// so a login on one process holds on all. One key encrypts every tenant's
// payloads, so no payload is known as one tenant's: only operators decode.
func (cp *ControlPlane) newGate(key []byte) error {
	hosts := cp.cfg.UIHosts
	// The UI binds the frontend's host (--temporal-listen) on --ui-listen's port.
	if h, _, err := net.SplitHostPort(cp.cfg.TemporalListen); err == nil && h != "" && !net.ParseIP(h).IsUnspecified() {
		hosts = append(hosts[:len(hosts):len(hosts)], h)
	}
	tenantOf := codec.KeyTenants(nil)
	g, err := webui.New(webui.Config{Tokens: cp.store, Key: webui.SessionKey(key), Listen: cp.cfg.UIListen, Hosts: hosts,
		RootTenant: api.RootTenant, WriteActions: cp.cfg.UIWriteActions, Codec: codec.HTTPHandler(key), PayloadTenant: tenantOf, Logger: cp.log})
	if err != nil {
		return err
	}
	cp.gate, cp.payloadTenant = g, tenantOf
	return nil
}

// guardCodec puts the API's codec endpoint behind the Web UI's session.
func (cp *ControlPlane) guardCodec(h http.Handler) http.Handler {
	return codec.Guard(h, cp.gate.CodecCaller, cp.payloadTenant)
}
