package api

import (
	"context"
	"crypto"
	"crypto/tls"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/pki"
)

// AgentsTLS is the agents' listener's TLS without its certificate: a client
// presents either no certificate (a join, whose token admits it), a site
// agent's, or an installed machine's (bcd node renews). A control-plane or
// ramdisk certificate is refused at the handshake; every handler checks the
// role it serves (sitePeer), so a node's certificate reaches only Renew.
func AgentsTLS(ca *pki.CA) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(),
		VerifyConnection: pki.VerifyPeer(ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleSite, pki.RoleNode}, Optional: true})}
}

// serveHostRule is the rule of the site's serving names: never the control
// plane's or Temporal's, loopback only in a loopback lab.
func (a Agents) serveHostRule(lab bool) pki.ServeHostRule {
	return pki.ServeHostRule{Reserved: a.ReservedHosts, LoopbackLab: lab}
}

// precheckServeHosts refuses, before a join consumes its token, what the
// token's site may not be certified for; servingCert checks again after.
// A token that is not a usable site token is left to admit to refuse.
func (s join) precheckServeHosts(ctx context.Context, m *v1.JoinRequest) error {
	lab := true // without the site, check only what no site may have
	if pki.Role(m.Role) == pki.RoleSite {
		tok, ok, err := s.store.PeekSiteToken(ctx, pki.HashToken(m.Token), s.now())
		if err != nil {
			return err
		}
		if ok {
			site, err := s.store.GetSite(ctx, tok.TenantID, tok.SiteID)
			if err != nil {
				return err
			}
			lab = site.LoopbackLab
		}
	}
	_, err := s.a.serveHostRule(lab).Check(m.ServeHosts)
	return err
}

// servingCert issues the site agent's serving certificate for hosts. A join
// declares the site's names (stored on the site); a renewal may name only
// those. A site that joined before names were declared declares them at its
// first renewal, under the same rule as a join.
func (s join) servingCert(ctx context.Context, adm admission, pub crypto.PublicKey, hosts []string, renewal bool) ([]byte, error) {
	site, err := s.store.GetSite(ctx, adm.tenant, adm.site)
	if err != nil {
		return nil, err
	}
	rule := s.a.serveHostRule(site.LoopbackLab)
	declare := !renewal || len(site.ServeHosts) == 0
	if !declare {
		rule.Declared = site.ServeHosts
	}
	canon, err := rule.Check(hosts)
	if err != nil {
		return nil, err
	}
	if declare {
		if err := s.store.DeclareServeHosts(ctx, adm.tenant, adm.site, canon, exclusive(canon)); err != nil {
			return nil, err
		}
	}
	if len(canon) == 0 {
		return nil, nil
	}
	return s.a.CA.IssueServer(pub, adm.role, adm.identity, canon, adm.ttl)
}

// exclusive are the hosts only one site may declare: all but loopback,
// which every loopback lab shares.
func exclusive(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if !pki.IsLoopbackHost(h) {
			out = append(out, h)
		}
	}
	return out
}
