//go:build fakehw

package demo_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// How TestNoSecretAnywhere finds secrets, and records what it searches.
// Other tests may search their own logs the same way: collect secretsIn
// their data dir (and storeSecrets, passwordSecret, tokenSecret), then
// scanForSecrets(t, secrets, logFiles...).

// A secret is one form of a value the run made that must appear nowhere it
// is not kept: plain, or an encoding it would plausibly leak in.
type secret struct {
	name  string // what it is and in which form, for the failure
	value []byte
}

// minSecretLen keeps short forms (a PEM body's last line) out: they could
// match by chance.
const minSecretLen = 16

// maxHits bounds the failures reported per secret and place.
const maxHits = 3

// plainToken matches any token pki.NewToken makes, known to the test or
// not (a provisioned token, a tenant's API token): none belongs in a log.
var plainToken = regexp.MustCompile(`bc[a-z]{2,8}_[a-z2-7]{52}`)

// tokenSecret is a token: only its plain form exists (it prints redacted).
func tokenSecret(name, plain string) []secret {
	return []secret{{name, []byte(strings.TrimSpace(plain))}}
}

// passwordSecret is a password in clear and in an HTTP Basic header.
func passwordSecret(name, user, password string) []secret {
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return []secret{{name, []byte(password)}, {name + " (Basic auth)", []byte(basic)}}
}

// keySecret is raw key material in every form a log or a JSON document
// would show it: raw, base64 (std and URL, padding or not), hex, Go's %v
// and slog's quoted form of a []byte.
func keySecret(name string, raw []byte) []secret {
	forms := []secret{
		{name + " (raw)", raw},
		{name + " (base64)", []byte(strings.TrimRight(base64.StdEncoding.EncodeToString(raw), "="))},
		{name + " (base64url)", []byte(base64.RawURLEncoding.EncodeToString(raw))},
		{name + " (hex)", []byte(hex.EncodeToString(raw))},
		{name + " (HEX)", []byte(strings.ToUpper(hex.EncodeToString(raw)))},
		{name + " (%v)", []byte(fmt.Sprint(raw))},
		{name + " (quoted)", []byte(strings.Trim(strconv.Quote(string(raw)), `"`))},
	}
	var out []secret
	for _, f := range forms {
		if !containsValue(out, f.value) {
			out = append(out, f)
		}
	}
	return out
}

// pemKeySecret is a PEM private key: each line of its body, the DER, and
// the private scalar or seed alone, each in keySecret's forms.
func pemKeySecret(t *testing.T, name string, pemBytes []byte) []secret {
	t.Helper()
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		t.Fatalf("pem.Decode(%s) = nil, want a private key", name)
	}
	var out []secret
	for i, line := range strings.Split(strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: blk.Type, Bytes: blk.Bytes}))), "\n") {
		if !strings.HasPrefix(line, "-----") {
			out = append(out, secret{fmt.Sprintf("%s (PEM line %d)", name, i), []byte(line)})
		}
	}
	out = append(out, keySecret(name+" DER", blk.Bytes)...)
	k, err := pki.ParseKey(pemBytes)
	if err != nil {
		t.Fatalf("pki.ParseKey(%s) = %v", name, err)
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		d, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, keySecret(name+" scalar", d)...)
	case ed25519.PrivateKey:
		out = append(out, keySecret(name+" seed", k.Seed())...)
	}
	return out
}

func containsValue(ss []secret, v []byte) bool {
	for _, s := range ss {
		if bytes.Equal(s.value, v) {
			return true
		}
	}
	return false
}

// secretsIn collects the secrets kept in files under dir: the root API token
// (root-token), site tokens (site-token*), the key file (master.key) and every
// private key (*.key; PostgreSQL's directory left out).
func secretsIn(t *testing.T, dir string) []secret {
	t.Helper()
	var out []secret
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case e.IsDir() && e.Name() == "postgres":
			return filepath.SkipDir
		case e.IsDir():
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch name := e.Name(); {
		case name == "root-token" || strings.HasPrefix(name, "site-token"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, tokenSecret(rel, string(b))...)
		case name == controlplane.KeyFile: // 32 raw bytes, not PEM
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, keySecret(rel, b)...)
		case strings.HasSuffix(name, ".key"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, pemKeySecret(t, rel, b)...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// storeSecrets are the keys the control plane keeps wrapped in data_keys:
// every payload codec key and the key that seals secrets (BMC passwords).
func storeSecrets(t *testing.T, s *store.Store) []secret {
	t.Helper()
	ctx := context.Background()
	codecKeys, err := s.CodecKeys(ctx)
	if err != nil {
		t.Fatalf("CodecKeys = %v", err)
	}
	sealKey, err := s.CurrentKey(ctx, store.PurposeSecrets, "")
	if err != nil {
		t.Fatalf("CurrentKey(secrets) = %v, want the key that sealed the BMC password", err)
	}
	out := keySecret("secrets key", sealKey.Key)
	for _, k := range codecKeys {
		out = append(out, keySecret("codec key "+k.ID, k.Key)...)
	}
	return out
}

// scanForSecrets fails t for every secret, and every plain token, in the
// files (logs), naming the file and line. It returns the bytes it read.
func scanForSecrets(t *testing.T, secrets []secret, files ...string) int64 {
	t.Helper()
	var n int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("read %s: %v", f, err)
			continue
		}
		n += int64(len(b))
		reportSecrets(t, secrets, b, func(off int) string {
			return fmt.Sprintf("%s:%d", f, 1+bytes.Count(b[:off], []byte("\n")))
		})
	}
	return n
}

// scanBytes fails t for every secret, and every plain token, in b, which
// is what where names (an API answer, a history event, a row).
func scanBytes(t *testing.T, secrets []secret, where string, b []byte) {
	t.Helper()
	reportSecrets(t, secrets, b, func(int) string { return where })
}

func reportSecrets(t *testing.T, secrets []secret, b []byte, at func(off int) string) {
	t.Helper()
	for _, s := range secrets {
		if len(s.value) < minSecretLen {
			continue
		}
		for i, from := 0, 0; i < maxHits; i++ {
			off := bytes.Index(b[from:], s.value)
			if off < 0 {
				break
			}
			off += from
			t.Errorf("%s is at %s: %s", s.name, at(off), excerpt(b, off, len(s.value)))
			from = off + len(s.value)
		}
	}
	hits := 0
	for _, m := range plainToken.FindAllIndex(b, -1) {
		if containsValue(secrets, b[m[0]:m[1]]) || hits == maxHits {
			continue // reported by name above
		}
		hits++
		t.Errorf("a plain token (%s) is at %s: %s", b[m[0]:m[0]+6], at(m[0]), excerpt(b, m[0], m[1]-m[0]))
	}
}

// excerpt shows what surrounds a secret, the secret itself left out.
func excerpt(b []byte, off, n int) string {
	from, to := max(0, off-80), min(len(b), off+n+80)
	if i := bytes.LastIndexByte(b[from:off], '\n'); i >= 0 {
		from += i + 1
	}
	if i := bytes.IndexByte(b[off+n:to], '\n'); i >= 0 {
		to = off + n + i
	}
	return strconv.Quote(string(b[from:off]) + "«secret»" + string(b[off+n:to]))
}

// apiAnswers records every answer (or error) the demo's API client got.
type apiAnswers struct {
	mu  sync.Mutex
	got []apiAnswer
}

type apiAnswer struct {
	procedure string
	body      []byte
}

// issuers answer with a secret by design: that one answer is how an
// operator gets it, so it is not searched.
var issuers = map[string]bool{
	bettercomputev1connect.SiteTokensServiceCreateProcedure: true,
	bettercomputev1connect.TenantsServiceCreateProcedure:    true,
}

func (a *apiAnswers) interceptor() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			proc := req.Spec().Procedure
			if issuers[proc] {
				return resp, err
			}
			var body []byte
			if err != nil {
				body = []byte(err.Error())
			} else if m, ok := resp.Any().(proto.Message); ok {
				body, _ = protojson.Marshal(m)
			}
			a.mu.Lock()
			a.got = append(a.got, apiAnswer{proc, body})
			a.mu.Unlock()
			return resp, err
		}
	})
}

func (a *apiAnswers) all() []apiAnswer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apiAnswer(nil), a.got...)
}

// logFiles is one debug-level log file per process of the demo.
type logFiles struct {
	dir   string
	files map[string]*os.File
}

func openLogs(t *testing.T, dir string, names ...string) *logFiles {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l := &logFiles{dir: dir, files: map[string]*os.File{}}
	for _, n := range names {
		f, err := os.Create(filepath.Join(dir, n+".log"))
		if err != nil {
			t.Fatal(err)
		}
		l.files[n] = f
	}
	t.Cleanup(l.close)
	return l
}

func (l *logFiles) file(name string) *os.File { return l.files[name] }

func (l *logFiles) logger(name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(l.files[name], &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logFiles) close() {
	for _, f := range l.files {
		f.Close()
	}
}

func (l *logFiles) paths() []string {
	var out []string
	for _, f := range l.files {
		out = append(out, f.Name())
	}
	return out
}

// checkWritten fails t for a process whose log is empty: its logger was
// not wired, and a search of it would prove nothing.
func (l *logFiles) checkWritten(t *testing.T) {
	t.Helper()
	for name := range l.files {
		b, err := os.ReadFile(filepath.Join(l.dir, name+".log"))
		if err != nil || len(b) == 0 {
			t.Errorf("%s.log is empty (%v), want the process's logs", name, err)
		}
		t.Logf("%s.log: %d lines, %d at debug", name, bytes.Count(b, []byte("\n")), bytes.Count(b, []byte("level=DEBUG")))
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
