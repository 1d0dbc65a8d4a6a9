package pki

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestNewTokenFormAndHash(t *testing.T) {
	t.Parallel()
	for _, kind := range []TokenKind{TokenSite, TokenDiscovery, TokenProvisioned, TokenAPI} {
		plain, hash := NewToken(kind)
		s := string(plain)
		prefix := "bc" + string(kind) + "_"
		if !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+52 {
			t.Errorf("NewToken(%s) = %d bytes with prefix %q, want %q and 52 base32 chars", kind, len(s), s[:len(prefix)], prefix)
		}
		if want := sha256.Sum256([]byte(s)); !bytes.Equal(hash, want[:]) || !bytes.Equal(HashToken(s), hash) {
			t.Errorf("NewToken(%s) hash is not SHA-256 of the plain token", kind)
		}
		if !TokenMatches(s, hash) {
			t.Errorf("TokenMatches(NewToken(%s)) = false, want true", kind)
		}
		other, _ := NewToken(kind)
		if other == plain || TokenMatches(string(other), hash) {
			t.Errorf("two NewToken(%s) collide or match each other's hash", kind)
		}
		tok, gotKind, err := ParseToken(s)
		if err != nil || tok != plain || gotKind != kind {
			t.Errorf("ParseToken(NewToken(%s)) = %s, %q, %v; want the token, %q", kind, tok, gotKind, err, kind)
		}
	}
	_, hash := NewToken(TokenSite)
	for _, tt := range []struct {
		plain string
		hash  []byte
	}{
		{"", hash}, {"bcsite_x", hash}, {"bcsite_x", nil}, {"", nil},
	} {
		if TokenMatches(tt.plain, tt.hash) {
			t.Errorf("TokenMatches(%q, %x) = true, want false", tt.plain, tt.hash)
		}
	}
}

func TestParseTokenRefusesMalformed(t *testing.T) {
	t.Parallel()
	good, _ := NewToken(TokenProvisioned)
	body := strings.TrimPrefix(string(good), "bcprov_")
	for _, s := range []string{
		"", "bcprov", "bcprov_", "prov_" + body, "bcPROV_" + body, "bc_" + body, "bcp_" + body,
		"bcprov_" + body[1:], "bcprov_" + body + "a", "bcprov_" + strings.ToUpper(body),
		"bcprov_" + body[:51] + "1", "bcprov_" + body[:51] + "=",
	} {
		tok, _, err := ParseToken(s)
		if !errs.Is(err, errs.Unauthenticated) || tok != "" {
			t.Errorf("ParseToken(%q) = %q, %v; want UNAUTHENTICATED", s, tok, err)
		}
		if err != nil && len(s) > 10 && strings.Contains(err.Error(), s) {
			t.Errorf("ParseToken(%q) error contains the token", s)
		}
	}
}

func TestNewTokenPanicsOnBadKind(t *testing.T) {
	t.Parallel()
	for _, kind := range []TokenKind{"", "x", "Site", "si_te", "toolongkind"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewToken(%q) did not panic", kind)
				}
			}()
			NewToken(kind)
		}()
	}
}

func TestTokenNeverPrintsItself(t *testing.T) {
	t.Parallel()
	tok, _ := NewToken(TokenSite)
	secret := strings.TrimPrefix(string(tok), "bcsite_")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	logger.Info("joined", "token", tok)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("joined", "token", tok)
	outputs := []string{
		fmt.Sprint(tok), fmt.Sprintf("%v %s %q %+v %#v %x", tok, tok, tok, tok, tok, tok),
		fmt.Sprintf("%v", struct{ T Token }{tok}), tok.String(), logs.String(),
	}
	for _, out := range outputs {
		if strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) {
			t.Errorf("printed token %q contains the secret", out)
		}
	}
	if got, want := tok.String(), "bcsite_…(redacted)"; got != want {
		t.Errorf("Token.String() = %q, want %q", got, want)
	}
	for _, malformed := range []Token{"no underscore secret", "password_hunter2", "bc_x", ""} {
		if got, want := malformed.String(), "(redacted)"; got != want {
			t.Errorf("Token(%d bytes).String() = %q, want %q", len(malformed), got, want)
		}
	}
}
