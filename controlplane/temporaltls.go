package controlplane

import (
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/tserver"
)

// Files in the pki dir.
const (
	// controlPlaneKeyFile is the control plane's own key (0600): it serves
	// the agents' listener and the embedded Temporal frontend, and the
	// control plane's Temporal client and the Web UI present it.
	controlPlaneKeyFile = "control-plane.key"
	// temporalCertFile is the embedded frontend's certificate, issued anew at
	// each start for controlPlaneKeyFile.
	temporalCertFile = "temporal-frontend.crt"
)

// embeddedTLS issues the embedded frontend's serving certificate for host
// (the host of --temporal-listen) and returns the server's TLS settings; nil
// without a CA, when the frontend stays plain.
func (cp *ControlPlane) embeddedTLS(host string) (*tserver.TLS, error) {
	if cp.ca == nil {
		return nil, nil
	}
	keyPath := filepath.Join(cp.cfg.PKIDir, controlPlaneKeyFile)
	signer, err := pki.LoadOrCreateKey(keyPath, pki.NewKey)
	if err != nil {
		return nil, err
	}
	certPEM, err := cp.ca.IssueServer(signer.Public(), pki.RoleControlPlane, "control-plane", frontendHosts(host), pki.MaxTTL)
	if err != nil {
		return nil, err
	}
	certPath := filepath.Join(cp.cfg.PKIDir, temporalCertFile)
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &tserver.TLS{CertFile: certPath, KeyFile: keyPath, CAFile: cp.CAFile()}, nil
}

// frontendHosts are the names the frontend's certificate carries: its own
// host, unless a wildcard, and loopback, which local clients dial.
func frontendHosts(host string) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) && !slices.Contains(hosts, host) {
		hosts = append([]string{host}, hosts...)
	}
	return hosts
}

// writeFileAtomic writes data to path through a synced temporary file
// renamed over it, so a reader sees the old file or the new one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write %s", path)
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return errs.Wrap(errs.Internal, err, "cannot write %s", path)
	}
	return nil
}
