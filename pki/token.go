package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"log/slog"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// TokenKind is the short word after "bc" in a token: it tells a human, a log
// scanner and the JoinService what the token is for before any lookup.
type TokenKind string

const (
	TokenSite        TokenKind = "site" // site token: admits site agents (site-tokens create)
	TokenDiscovery   TokenKind = "disc" // discovery token: one per ramdisk boot, on its kernel command line
	TokenProvisioned TokenKind = "prov" // single-use provisioned token: admits an installed machine's bcd node
	TokenAPI         TokenKind = "api"  // API token of an identity
)

// tokenBytes is the entropy of a token.
const tokenBytes = 32

// tokenChars is the length of the base32 part: 32 bytes, unpadded.
const tokenChars = (tokenBytes*8 + 4) / 5

// Token is a plain join or API token, bc<kind>_<52 lowercase base32 chars>. It
// prints itself redacted (fmt, slog); string(t) is the secret, to be shown once
// or written to a 0600 file and never logged. Store only HashToken of it.
type Token string

// String returns the token redacted: its kind prefix and "…(redacted)".
func (t Token) String() string {
	if prefix, _, ok := strings.Cut(string(t), "_"); ok && strings.HasPrefix(prefix, "bc") && validKind(TokenKind(prefix[2:])) {
		return prefix + "_…(redacted)"
	}
	return "(redacted)"
}

// GoString keeps %#v redacted too.
func (t Token) GoString() string { return t.String() }

// LogValue keeps slog redacted.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }

func isLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return s != ""
}

func validKind(k TokenKind) bool { return len(k) >= 2 && len(k) <= 8 && isLower(string(k)) }

func tokenEncoding() *base32.Encoding {
	return base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
}

// NewToken returns a new token of kind (32 random bytes) and its hash, the only
// form anyone stores. kind is one of the Token* constants, or any 2 to 8
// lowercase letters; anything else is a programming error and panics.
func NewToken(kind TokenKind) (Token, []byte) {
	if !validKind(kind) {
		panic("pki.NewToken: token kind " + string(kind) + " is not 2 to 8 lowercase letters")
	}
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (it crashes the program instead)
	plain := Token("bc" + string(kind) + "_" + tokenEncoding().EncodeToString(b[:]))
	return plain, HashToken(string(plain))
}

// HashToken returns the SHA-256 of the plain token, what is stored and looked up.
func HashToken(plain string) []byte {
	h := sha256.Sum256([]byte(plain))
	return h[:]
}

// TokenMatches reports, in constant time, whether plain hashes to hash.
func TokenMatches(plain string, hash []byte) bool {
	return subtle.ConstantTimeCompare(HashToken(plain), hash) == 1
}

// ParseToken checks the form of a presented token and returns it with its kind.
// The error never contains the token.
func ParseToken(plain string) (Token, TokenKind, error) {
	prefix, body, ok := strings.Cut(plain, "_")
	kind, ok2 := strings.CutPrefix(prefix, "bc")
	if !ok || !ok2 || !validKind(TokenKind(kind)) || len(body) != tokenChars {
		return "", "", errs.New(errs.Unauthenticated, "the token is not of the form bc<kind>_<%d base32 characters>", tokenChars)
	}
	if _, err := tokenEncoding().DecodeString(body); err != nil {
		return "", "", errs.New(errs.Unauthenticated, "the token is not of the form bc<kind>_<%d base32 characters>", tokenChars)
	}
	return Token(plain), TokenKind(kind), nil
}
