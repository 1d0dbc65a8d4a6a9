package controlplane_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bccli "github.com/better-compute/better-compute/cli"
	"github.com/better-compute/better-compute/controlplane"
)

// TestServeTLSAndKeysRotate: serve with --tls-cert answers TLS only, the
// CLI reaches it with the CA (--ca-file) and not without; keys rotate runs
// beside it over its private PostgreSQL, which keeps running, and the key
// file is 0600 and refused when wider.
func TestServeTLSAndKeysRotate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := selfSigned(t, t.TempDir())
	cp := start(t, controlplane.Config{DataDir: dir, TLSCert: certFile, TLSKey: keyFile})
	defer cp.Stop()
	if !strings.HasPrefix(cp.APIURL(), "https://") {
		t.Fatalf("APIURL() = %s, want https://", cp.APIURL())
	}
	plain := "http://" + strings.TrimPrefix(cp.APIURL(), "https://")
	if resp, err := http.Post(plain+"/bettercompute.v1.TenantsService/List", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to a TLS API = 200, want refused")
		}
	}
	cli := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		app := bccli.App(&out, &errOut)
		code := bccli.Run(context.Background(), app, append([]string{"better-compute", "--url", cp.APIURL(), "--data-dir", dir}, args...), &errOut)
		return out.String() + errOut.String(), code
	}
	if out, code := cli("--ca-file", caFile, "sites", "create", "--kind", "shared", "--region", "lab-1", "--key", "k"); code != 0 {
		t.Fatalf("better-compute --ca-file sites create = %d: %s", code, out)
	}
	if out, code := cli("sites", "list"); code == 0 || !strings.Contains(out, "certificate") {
		t.Errorf("better-compute sites list without the CA = %d %q, want a certificate error", code, out)
	}
	valueFile := filepath.Join(t.TempDir(), "bmc")
	if err := os.WriteFile(valueFile, []byte("u:p"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := cli("--ca-file", caFile, "secrets", "put", "bmc", "--from-file", valueFile); code != 0 {
		t.Fatalf("secrets put = %d: %s", code, out)
	}

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := controlplane.RotateKeys(ctx, controlplane.Config{DataDir: dir, Logger: quiet()}, &out); err != nil {
		t.Fatalf("RotateKeys(beside serve) = %v", err)
	}
	if !strings.Contains(out.String(), "1 secrets re-sealed, retired 1 old key") {
		t.Errorf("RotateKeys() printed %q, want 1 secret re-sealed and 1 key retired", out.String())
	}
	if out, code := cli("--ca-file", caFile, "secrets", "list"); code != 0 || !strings.Contains(out, "bmc") { // its PostgreSQL still runs
		t.Errorf("secrets list after keys rotate = %d %q, want bmc", code, out)
	}

	st, err := os.Stat(filepath.Join(dir, controlplane.KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file = %v, %v; want mode 0600", st, err)
	}
	if err := os.Chmod(filepath.Join(dir, controlplane.KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.RotateKeys(ctx, controlplane.Config{DataDir: dir, Logger: quiet()}, &out); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("RotateKeys(key file 0644) = %v, want refused (chmod 600)", err)
	}
}

// selfSigned writes a CA-less self-signed certificate for 127.0.0.1 and
// its key; the certificate is its own CA file.
func selfSigned(t *testing.T, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "api.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	write := func(p, typ string, b []byte) {
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", der)
	write(keyFile, "PRIVATE KEY", kb)
	return certFile, keyFile, certFile
}
