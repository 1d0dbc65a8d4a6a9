package nodeagent_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/nodeagent"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/siteagent"
	"github.com/better-compute/better-compute/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// syncBuffer collects logs written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// world is a real control plane's agents listener over a fresh database,
// with a site (a loopback lab) and one enrolled node.
type world struct {
	s          *store.Store
	ca         *pki.CA
	caFile     string
	url        string
	site, node string
	logs       *syncBuffer
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	w := &world{s: testpg.New(t), logs: &syncBuffer{}}
	dir := t.TempDir()
	ca, err := pki.Init(dir, "node.example.test")
	if err != nil {
		t.Fatal(err)
	}
	w.ca, w.caFile = ca, filepath.Join(dir, pki.CACertFile)
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewUnstartedServer(api.New(api.Config{Store: w.s, Logger: log}).AgentsHandler(api.Agents{CA: ca,
		TemporalAddresses: []string{"127.0.0.1:1"}, TemporalNamespace: "default",
		CodecKey: func(context.Context, string) ([]byte, error) { return make([]byte, 32), nil }}))
	srv.TLS = api.AgentsTLS(ca)
	key, keyPEM, _ := pki.NewKey()
	certPEM, err := ca.IssueServer(key.Public(), pki.RoleControlPlane, "control-plane", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(certPEM, keyPEM)
	srv.TLS.Certificates = []tls.Certificate{pair}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	w.url = srv.URL
	if err := w.s.EnsureTenant(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	site, _, err := w.s.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r", LoopbackLab: true})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := w.s.CreatePool(ctx, store.Pool{TenantID: "root", SiteID: site.ID, Class: "metal-host", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.s.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "root", SiteID: site.ID, PoolID: pool.ID,
		BMCAddress: "https://bmc.test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: "env://BCD_SECRET_X"})
	if err != nil {
		t.Fatal(err)
	}
	w.site, w.node = site.ID, n.ID
	return w
}

// issue issues a provisioned token as a step does (sdk.PKI in a committed
// transaction) and writes it where an installer would.
func (w *world) issue(t *testing.T) (string, string) {
	t.Helper()
	var tok sdk.JoinToken
	if err := pgx.BeginFunc(t.Context(), w.s.Pool(), func(tx pgx.Tx) (err error) {
		tok, err = controlplane.JoinTokens{}.IssueJoinToken(t.Context(), tx, sdk.Node{ID: w.node, TenantID: "root"},
			sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1})
		return err
	}); err != nil {
		t.Fatalf("IssueJoinToken = %v", err)
	}
	file := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(file, []byte(string(tok.Token)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return string(tok.Token), file
}

func (w *world) config(dataDir, tokenFile string) nodeagent.Config {
	return nodeagent.Config{ControlPlaneURL: w.url, CAFile: w.caFile, TokenFile: tokenFile, DataDir: dataDir,
		Logger: slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// bcd node joins with a provisioned token as the step's node (role node),
// removes the token file, keeps its key and certificate 0600, restarts from
// them without a token, and renews; the token is refused a second time and
// appears in no log.
func TestJoinRestartRenew(t *testing.T) {
	w := newWorld(t)
	token, file := w.issue(t)
	dataDir := filepath.Join(t.TempDir(), "node")
	a, err := nodeagent.Start(t.Context(), w.config(dataDir, file))
	if err != nil {
		t.Fatalf("Start(first, with the token) = %v", err)
	}
	cert := a.Certificate()
	if role, id, err := w.ca.Verify(cert); err != nil || role != pki.RoleNode || id != w.node || a.NodeID() != w.node {
		t.Fatalf("joined as %s %s (%v), want node %s", role, id, err, w.node)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the token file after the join: %v, want it removed", err)
	}
	for _, f := range []string{nodeagent.KeyFile, nodeagent.CertFile} {
		if fi, err := os.Stat(filepath.Join(dataDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s = %v, %v, want mode 0600", f, fi, err)
		}
	}

	// The same token again, from another data dir: refused.
	again := filepath.Join(t.TempDir(), "join-token")
	_ = os.WriteFile(again, []byte(token), 0o600)
	if _, err := nodeagent.Start(t.Context(), w.config(filepath.Join(t.TempDir(), "other"), again)); !errs.Is(err, errs.Unauthenticated) ||
		!strings.Contains(err.Error(), "already used") {
		t.Errorf("Start(the used token) = %v, want UNAUTHENTICATED already used", err)
	}

	// A restart needs no token.
	b, err := nodeagent.Start(t.Context(), w.config(dataDir, ""))
	if err != nil || b.Certificate().SerialNumber.Cmp(cert.SerialNumber) != 0 {
		t.Fatalf("Start(restart, no token) = %v, want the stored certificate", err)
	}

	// Not due: nothing happens; 25 of 30 days later: renewed for the same key.
	if err := b.RenewIfDue(t.Context()); err != nil || b.Certificate().SerialNumber.Cmp(cert.SerialNumber) != 0 {
		t.Fatalf("RenewIfDue(fresh) = %v, want no renewal", err)
	}
	cfg := w.config(dataDir, "")
	cfg.Now = func() time.Time { return time.Now().Add(25 * 24 * time.Hour) }
	c, err := nodeagent.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RenewIfDue(t.Context()); err != nil {
		t.Fatalf("RenewIfDue(25 days later) = %v", err)
	}
	renewed := c.Certificate()
	if renewed.SerialNumber.Cmp(cert.SerialNumber) == 0 || renewed.NotAfter.Before(cert.NotAfter) ||
		!bytes.Equal(renewed.RawSubjectPublicKeyInfo, cert.RawSubjectPublicKeyInfo) {
		t.Errorf("renewed = serial %s until %s, want a new serial, no earlier, same key as %s until %s",
			renewed.SerialNumber.Text(16), renewed.NotAfter, cert.SerialNumber.Text(16), cert.NotAfter)
	}
	stored, _ := os.ReadFile(filepath.Join(dataDir, nodeagent.CertFile))
	if got, _ := pki.ParseCert(stored); got == nil || got.SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Errorf("cert.pem after the renewal is not the renewed certificate")
	}
	if strings.Contains(w.logs.String(), token) || strings.Contains(w.logs.String(), token[len("bcprov_"):]) {
		t.Errorf("the provisioned token appears in the logs")
	}
}

// With --site, bcd node joins and renews through its site agent's relay,
// which forwards both to the control plane; the site agent also serves the
// node's published artifacts at the URL Publish named.
func TestJoinThroughTheSite(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	plain, hash := pki.NewToken(pki.TokenSite)
	if _, _, err := w.s.CreateSiteToken(ctx, store.SiteToken{TenantID: "root", SiteID: w.site, ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
		t.Fatal(err)
	}
	siteTok := filepath.Join(t.TempDir(), "site-token")
	_ = os.WriteFile(siteTok, []byte(plain), 0o600)
	sa, err := siteagent.Start(ctx, siteagent.Config{ControlPlaneURL: w.url, CAFile: w.caFile, TokenFile: siteTok,
		DataDir: filepath.Join(t.TempDir(), "site"), BootListen: "127.0.0.1:0", RelayListen: "127.0.0.1:0",
		AdvertiseHost: "127.0.0.1", DisableWorker: true,
		Logger: slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("siteagent.Start = %v", err)
	}
	t.Cleanup(sa.Stop)

	token, file := w.issue(t)
	cfg := w.config(filepath.Join(t.TempDir(), "node"), file)
	cfg.ControlPlaneURL, cfg.SiteURL = "", sa.RelayURL()
	a, err := nodeagent.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start(--site) = %v", err)
	}
	if role, id, err := w.ca.Verify(a.Certificate()); err != nil || role != pki.RoleNode || id != w.node {
		t.Errorf("joined through the site as %s %s (%v), want node %s", role, id, err, w.node)
	}
	// Renewed through the site too, 25 of 30 days later.
	cfg.TokenFile, cfg.Now = "", func() time.Time { return time.Now().Add(25 * 24 * time.Hour) }
	later, err := nodeagent.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := later.RenewIfDue(ctx); err != nil || later.Certificate().SerialNumber.Cmp(a.Certificate().SerialNumber) == 0 {
		t.Fatalf("RenewIfDue(--site, 25 days later) = %v, want a new certificate", err)
	}
	if role, id, err := w.ca.Verify(later.Certificate()); err != nil || role != pki.RoleNode || id != w.node {
		t.Errorf("renewed through the site as %s %s (%v), want node %s", role, id, err, w.node)
	}

	// The site agent said where it serves artifacts; a published one is
	// served there, and only its exact URL.
	var url string
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = pgx.BeginFunc(ctx, w.s.Pool(), func(tx pgx.Tx) (err error) {
			url, err = controlplane.ArtifactStore{}.Publish(ctx, tx, sdk.Node{ID: w.node, TenantID: "root"}, "seed.iso", []byte("iso bytes"), time.Hour)
			return err
		})
		if !errs.Is(err, errs.InvalidState) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !strings.HasPrefix(url, sa.BootURL()+"/artifacts/") {
		t.Fatalf("Publish = %q, %v, want a URL under %s/artifacts/", url, err, sa.BootURL())
	}
	for _, tc := range []struct {
		url  string
		want int
		body string
	}{{url, 200, "iso bytes"}, {url + "x", 404, ""}, {sa.BootURL() + "/artifacts/" + strings.Repeat("a", 52) + "/seed.iso", 404, ""}} {
		resp, err := http.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || tc.want == 200 && string(b) != tc.body {
			t.Errorf("GET %s = %d %q, want %d %q", tc.url, resp.StatusCode, b, tc.want, tc.body)
		}
	}
	if strings.Contains(w.logs.String(), token) {
		t.Errorf("the provisioned token appears in the logs")
	}
}

// A token file left beside a complete join (the agent died between saving
// its certificate and removing the file) is removed at the next start,
// which keeps the stored join.
func TestRestartRemovesLeftoverToken(t *testing.T) {
	w := newWorld(t)
	token, file := w.issue(t)
	dataDir := filepath.Join(t.TempDir(), "node")
	a, err := nodeagent.Start(t.Context(), w.config(dataDir, file))
	if err != nil {
		t.Fatalf("Start(first) = %v", err)
	}
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil { // as if never removed
		t.Fatal(err)
	}
	b, err := nodeagent.Start(t.Context(), w.config(dataDir, file))
	if err != nil || b.Certificate().SerialNumber.Cmp(a.Certificate().SerialNumber) != 0 {
		t.Fatalf("Start(restart beside a token file) = %v, want the stored certificate", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the token file after the restart: stat = %v, want it removed", err)
	}
}

// Run keeps trying to join while the control plane cannot be reached (an
// installed machine may boot before its network or the control plane is
// up), and joins once it can.
func TestRunRetriesUnreachableJoin(t *testing.T) {
	w := newWorld(t)
	_, file := w.issue(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there yet
	cfg := w.config(filepath.Join(t.TempDir(), "node"), file)
	cfg.ControlPlaneURL = "https://" + addr
	ctx, cancel := context.WithCancel(t.Context())
	var runErr error
	done := make(chan struct{})
	go func() { defer close(done); runErr = nodeagent.Run(ctx, cfg) }()
	defer func() { cancel(); <-done }()
	time.Sleep(500 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("Run with the control plane unreachable = %v, want it to keep trying", runErr)
	default:
	}
	proxyTo(t, addr, strings.TrimPrefix(w.url, "https://")) // the control plane comes up
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, nodeagent.NodeFile)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no join 20 s after the control plane came up")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proxyTo forwards TCP connections on addr to target until the test ends.
func proxyTo(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
}
