package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverInClear(t *testing.T) {
	const plain = "bcprov_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	tok := JoinToken{Token: Secret(plain)}
	var out bytes.Buffer
	slog.New(slog.NewJSONHandler(&out, nil)).Info("issued", "token", tok.Token, "join", tok)
	slog.New(slog.NewTextHandler(&out, nil)).Info("issued", "token", tok.Token, "join", tok)
	b, err := json.Marshal(Values{"token": tok.Token, "join": tok})
	if err != nil {
		t.Fatal(err)
	}
	out.Write(b)
	fmt.Fprintf(&out, "%v %+v %#v %s", tok, tok, tok, tok.Token)
	// Verbs a string does not take print the value as a bad verb's
	// operand, without String: %!d(sdk.Secret=…).
	// (%p prints any non-pointer in clear before any method: vet refuses it.)
	bad := "%d %t %x %08b %c %U %e" // a variable: vet refuses these verbs in a constant
	fmt.Fprintf(&out, bad, tok, tok.Token, tok.Token, tok.Token, tok.Token, tok.Token, tok)
	if strings.Contains(out.String(), plain) || !strings.Contains(string(b), redacted) {
		t.Errorf("a Secret came out in clear or not redacted: %s", out.String())
	}
	if string(tok.Token) != plain {
		t.Errorf("string(Secret) = %q, want the secret", string(tok.Token))
	}
}
