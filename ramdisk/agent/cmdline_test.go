package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
)

func TestParseCmdline(t *testing.T) {
	t.Parallel()
	node := ids.New(ids.Node)
	tok, _ := pki.NewToken(pki.TokenDiscovery)
	site, _ := pki.NewToken(pki.TokenSite)
	ca := strings.Repeat("ab", 32)
	good := "initrd=initrd.img bc.site=https://10.0.0.1:8443 bc.node=" + node + " bc.token=" + string(tok) + " bc.ca=" + ca + " console=ttyS0"
	tests := []struct {
		name      string
		cmdline   string
		want      Boot
		wantField string // the INVALID_INPUT field, "" for success
	}{
		{"site's script", good, Boot{Site: "https://10.0.0.1:8443", NodeID: node, Token: tok, CAFingerprint: []byte(strings.Repeat("\xab", 32))}, ""},
		{"boot url and quotes", `quiet bc.site="https://relay.example:443/" ` + strings.TrimPrefix(good, "initrd=initrd.img bc.site=https://10.0.0.1:8443") + " bc.boot=http://10.0.0.1:8080",
			Boot{Site: "https://relay.example:443", NodeID: node, Token: tok, CAFingerprint: []byte(strings.Repeat("\xab", 32)), BootURL: "http://10.0.0.1:8080"}, ""},
		{"empty", "", Boot{}, "bc.site"},
		{"no node", strings.Replace(good, "bc.node=", "x.node=", 1), Boot{}, "bc.node"},
		{"no token", strings.Replace(good, "bc.token=", "bc.tokn=", 1), Boot{}, "bc.token"},
		{"empty ca", strings.Replace(good, "bc.ca="+ca, "bc.ca=", 1), Boot{}, "bc.ca"},
		{"plain http site", strings.Replace(good, "https://", "http://", 1), Boot{}, "bc.site"},
		{"site with path", strings.Replace(good, ":8443", ":8443/v1", 1), Boot{}, "bc.site"},
		{"site with user", strings.Replace(good, "https://", "https://u:p@", 1), Boot{}, "bc.site"},
		{"bad node", strings.Replace(good, node, "site_"+node[5:], 1), Boot{}, "bc.node"},
		{"site token", strings.Replace(good, string(tok), string(site), 1), Boot{}, "bc.token"},
		{"short ca", strings.Replace(good, ca, ca[:62], 1), Boot{}, "bc.ca"},
		{"non-hex ca", strings.Replace(good, ca, strings.Repeat("zz", 32), 1), Boot{}, "bc.ca"},
		{"twice", good + " bc.node=" + node, Boot{}, "bc.node"},
		{"bad boot", good + " bc.boot=ftp://x", Boot{}, "bc.boot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCmdline(tt.cmdline)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("ParseCmdline(%q) = %v, want success", tt.name, err)
				}
				if d := cmp.Diff(tt.want, got); d != "" {
					t.Errorf("ParseCmdline(%q) mismatch (-want +got):\n%s", tt.name, d)
				}
				return
			}
			var e *errs.Error
			if !errs.Is(err, errs.InvalidInput) || !asErr(err, &e) || e.Field != tt.wantField {
				t.Fatalf("ParseCmdline(%q) = %v, want INVALID_INPUT %s", tt.name, err, tt.wantField)
			}
			if strings.Contains(err.Error(), string(tok)) {
				t.Errorf("ParseCmdline(%q) error shows the token: %v", tt.name, err)
			}
		})
	}
}

func TestBootNeverPrintsToken(t *testing.T) {
	t.Parallel()
	tok, _ := pki.NewToken(pki.TokenDiscovery)
	b := Boot{Site: "https://x:1", Token: tok}
	if s := b.String(); strings.Contains(s, string(tok)) {
		t.Errorf("Boot.String() = %q, shows the token", s)
	}
}

func FuzzParseCmdline(f *testing.F) {
	tok, _ := pki.NewToken(pki.TokenDiscovery)
	node := ids.New(ids.Node)
	seeds := []string{
		"", " ", `"`, `bc.site="`, "bc.site=https://a:1 bc.node=" + node + " bc.token=" + string(tok) + " bc.ca=" + strings.Repeat("0", 64),
		"bc.site=https://[::1]:1/ bc.node=x bc.token=y bc.ca=z", "bc.site=https:// bc.site=https://a",
		"bc.site=https://a%zz", "bc.boot=http://a:1 bc.boot=", "bc.=x =y bc.site", "\x00bc.site=\xff",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseCmdline(s)
		if err != nil {
			if !errs.Is(err, errs.InvalidInput) {
				t.Fatalf("ParseCmdline(%q) = %v, want INVALID_INPUT", s, err)
			}
			return
		}
		if !strings.HasPrefix(b.Site, "https://") || !ids.Valid(ids.Node, b.NodeID) || len(b.CAFingerprint) != 32 {
			t.Fatalf("ParseCmdline(%q) = %v, accepted a bad boot", s, b)
		}
		if b.BootURL != "" && !strings.HasPrefix(b.BootURL, "http") {
			t.Fatalf("ParseCmdline(%q) = %v, bad boot URL", s, b)
		}
	})
}
