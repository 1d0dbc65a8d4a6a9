package controlplane

import (
	"net"
	"net/http"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/webui"
)

// newGate makes the Web UI's gate: the control plane's login in front of
// the UI and of the codec endpoints (codecH served on the UI's origin, the
// API's /codec/ guarded by the same session). Sessions are signed with a key
// derived from the key file, which every serve over this database holds and
// `keys rotate` leaves alone, so a login on one process holds on all.
func (cp *ControlPlane) newGate(codecH http.Handler, tenantOf codec.PayloadTenant) error {
	kek, err := codec.LoadOrCreateKey(cp.cfg.KeyFile)
	if err != nil {
		return err
	}
	hosts := cp.cfg.UIHosts
	// The UI binds the frontend's host (--temporal-listen) on --ui-listen's port.
	if h, _, err := net.SplitHostPort(cp.cfg.TemporalListen); err == nil && h != "" && !net.ParseIP(h).IsUnspecified() {
		hosts = append(hosts[:len(hosts):len(hosts)], h)
	}
	g, err := webui.New(webui.Config{Tokens: cp.store, Key: webui.SessionKey(kek), Listen: cp.cfg.UIListen, Hosts: hosts,
		RootTenant: api.RootTenant, WriteActions: cp.cfg.UIWriteActions, Codec: codecH, PayloadTenant: tenantOf, Logger: cp.log})
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
