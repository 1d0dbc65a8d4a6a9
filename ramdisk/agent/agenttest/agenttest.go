// Package agenttest owns a small site relay for tests of the ramdisk agent
// and the emulated rack: a real HTTPS server with a serving certificate from
// a throwaway project CA, presenting [leaf, CA], that admits ramdisks with
// discovery tokens it knows (POST /v1/join, protojson), then serves them
// commands over mTLS (GET /v1/commands/next, long-poll) and records the
// progress and results they post.
package agenttest

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	bcv1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
)

// TrustDomain is the trust domain of the relay's CA.
const TrustDomain = "relay.test"

// Join is one join request the relay admitted.
type Join struct {
	Token  string
	NodeID string
	Cert   []byte // the issued certificate, PEM
}

// Relay is a test site relay. Its methods are safe for concurrent use.
type Relay struct {
	CA  *pki.CA
	Srv *httptest.Server
	// SiteID is the site whose serving certificate the relay presents; its
	// join answers name it.
	SiteID string

	mu       sync.Mutex
	tokens   map[string]string // discovery token → node id
	queues   map[string]chan kinds.Command
	joins    []Join
	results  map[string][]kinds.Result
	progress []kinds.Progress
	closed   int           // connections the relay saw closed
	changed  chan struct{} // closed and replaced on every recorded event
}

// NewRelay starts a relay on 127.0.0.1; it stops when the test ends.
func NewRelay(t testing.TB) *Relay {
	t.Helper()
	return NewRelayFor(t)
}

// NewRelayFor starts a relay on 127.0.0.1 whose certificate also names
// hosts: the addresses a virtual machine reaches it at (10.0.2.2 from QEMU's
// user network).
func NewRelayFor(t testing.TB, hosts ...string) *Relay {
	t.Helper()
	ca, err := pki.Init(t.TempDir(), TrustDomain)
	if err != nil {
		t.Fatalf("pki.Init() = %v", err)
	}
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		t.Fatalf("pki.NewKey() = %v", err)
	}
	site := ids.New(ids.Site)
	certPEM, err := ca.IssueServer(key.Public(), pki.RoleSite, site, append([]string{"127.0.0.1", "localhost"}, hosts...), time.Hour)
	if err != nil {
		t.Fatalf("IssueServer() = %v", err)
	}
	pair, err := tls.X509KeyPair(append(certPEM, ca.CertPEM()...), keyPEM)
	if err != nil {
		t.Fatalf("X509KeyPair() = %v", err)
	}
	r := &Relay{CA: ca, SiteID: site, tokens: map[string]string{}, queues: map[string]chan kinds.Command{},
		results: map[string][]kinds.Result{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/join", r.join)
	mux.HandleFunc("GET /v1/commands/next", r.next)
	mux.HandleFunc("POST /v1/commands/{id}/progress", r.postProgress)
	mux.HandleFunc("POST /v1/commands/{id}/result", r.postResult)
	r.Srv = httptest.NewUnstartedServer(mux)
	r.Srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	r.Srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			r.mu.Lock()
			r.closed++
			r.mu.Unlock()
		}
	}
	r.Srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(),
		VerifyConnection: pki.VerifyPeer(ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleRamdisk}, Optional: true})}
	r.Srv.StartTLS()
	t.Cleanup(r.Srv.Close)
	return r
}

// ClosedConns is how many client connections the relay has seen closed.
func (r *Relay) ClosedConns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// URL is the relay's https://127.0.0.1:port.
func (r *Relay) URL() string { return r.Srv.URL }

// CAFingerprint is the hex SHA-256 of the CA certificate's DER (bc.ca).
func (r *Relay) CAFingerprint() string {
	sum := sha256.Sum256(r.CA.Certificate().Raw)
	return hex.EncodeToString(sum[:])
}

// NewToken makes a discovery token that admits nodeID once.
func (r *Relay) NewToken(nodeID string) string {
	tok, _ := pki.NewToken(pki.TokenDiscovery)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[string(tok)] = nodeID
	return string(tok)
}

// Cmdline returns a ramdisk kernel command line for nodeID with a fresh token.
func (r *Relay) Cmdline(nodeID, bootURL string) string {
	s := fmt.Sprintf("initrd=initrd.img bc.site=%s bc.node=%s bc.token=%s bc.ca=%s console=ttyS0",
		r.URL(), nodeID, r.NewToken(nodeID), r.CAFingerprint())
	if bootURL != "" {
		s += " bc.boot=" + bootURL
	}
	return s
}

// Send queues cmd for its node.
func (r *Relay) Send(cmd kinds.Command) { r.SendTo(cmd.NodeID, cmd) }

// SendTo queues cmd on node's queue, whatever node the command names.
func (r *Relay) SendTo(node string, cmd kinds.Command) { r.queue(node) <- cmd }

// Joins returns the joins admitted so far.
func (r *Relay) Joins() []Join {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Join(nil), r.joins...)
}

// Results returns every result posted for command id, in order.
func (r *Relay) Results(id string) []kinds.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kinds.Result(nil), r.results[id]...)
}

// Progress returns every progress report posted so far.
func (r *Relay) Progress() []kinds.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kinds.Progress(nil), r.progress...)
}

// WaitFor waits up to timeout for cond to hold, checking after every event.
func (r *Relay) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// WaitResult waits for the n-th result (1-based) of command id.
func (r *Relay) WaitResult(t testing.TB, id string, n int) kinds.Result {
	t.Helper()
	r.WaitFor(t, 20*time.Second, fmt.Sprintf("result %d of %s", n, id), func() bool { return len(r.Results(id)) >= n })
	return r.Results(id)[n-1]
}

func (r *Relay) queue(nodeID string) chan kinds.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.queues[nodeID]
	if !ok {
		q = make(chan kinds.Command, 64)
		r.queues[nodeID] = q
	}
	return q
}

// record runs f under the lock and wakes waiters.
func (r *Relay) record(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Relay) join(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var in bcv1.JoinRequest
	if err := protojson.Unmarshal(body, &in); err != nil {
		http.Error(w, "not a JoinRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	node, ok := r.tokens[in.GetToken()]
	delete(r.tokens, in.GetToken()) // single use
	r.mu.Unlock()
	if !ok || in.GetRole() != string(pki.RoleRamdisk) {
		http.Error(w, "unknown or used token", http.StatusUnauthorized)
		return
	}
	pub, err := pki.ParsePublicKey(in.GetPublicKeyPem())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cert, err := r.CA.Issue(pub, pki.RoleRamdisk, node, time.Hour)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out, _ := protojson.Marshal(&bcv1.JoinResponse{CertPem: cert, CaPem: r.CA.CertPEM(), Identity: node, SiteId: r.SiteID})
	r.record(func() { r.joins = append(r.joins, Join{Token: in.GetToken(), NodeID: node, Cert: cert}) })
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// peer returns the ramdisk's node id from its client certificate.
func (r *Relay) peer(w http.ResponseWriter, req *http.Request) (string, bool) {
	role, id, err := pki.PeerIdentity(*req.TLS, TrustDomain)
	if err != nil || role != pki.RoleRamdisk {
		http.Error(w, "a ramdisk certificate is required", http.StatusUnauthorized)
		return "", false
	}
	return id, true
}

func (r *Relay) next(w http.ResponseWriter, req *http.Request) {
	node, ok := r.peer(w, req)
	if !ok {
		return
	}
	wait, err := time.ParseDuration(req.URL.Query().Get("wait"))
	if err != nil || wait > time.Minute {
		http.Error(w, "bad wait", http.StatusBadRequest)
		return
	}
	select {
	case cmd := <-r.queue(node):
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(cmd)
	case <-time.After(wait):
		w.WriteHeader(http.StatusNoContent)
	case <-req.Context().Done():
	}
}

func (r *Relay) postProgress(w http.ResponseWriter, req *http.Request) {
	if _, ok := r.peer(w, req); !ok {
		return
	}
	var p kinds.Progress
	if err := json.NewDecoder(req.Body).Decode(&p); err != nil || p.CommandID != req.PathValue("id") {
		http.Error(w, "bad progress", http.StatusBadRequest)
		return
	}
	r.record(func() { r.progress = append(r.progress, p) })
	w.WriteHeader(http.StatusNoContent)
}

func (r *Relay) postResult(w http.ResponseWriter, req *http.Request) {
	if _, ok := r.peer(w, req); !ok {
		return
	}
	var res kinds.Result
	if err := json.NewDecoder(req.Body).Decode(&res); err != nil || res.CommandID != req.PathValue("id") {
		http.Error(w, "bad result", http.StatusBadRequest)
		return
	}
	r.record(func() { r.results[res.CommandID] = append(r.results[res.CommandID], res) })
	w.WriteHeader(http.StatusNoContent)
}
