// Package frontends dials the frontends of one Temporal cluster as one
// gRPC target the client balances over (the SDK's round robin), so that
// the loss of one frontend is not the loss of Temporal: `serve
// --temporal-address a,b` and the site agent (which its join and renewals
// give the list) both dial this way.
package frontends

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// scheme names the resolver in the target; each Set's resolver is given
// to its own connection (grpc.WithResolvers), so sets never mix.
const scheme = "bc-frontends"

// Split returns the addresses of a comma-separated list, trimmed, empty
// ones dropped.
func Split(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Target is the target and dial options of a Temporal client for addrs:
// one address as it is; several as a Set's fixed list.
func Target(addrs []string) (string, []grpc.DialOption) {
	if len(addrs) == 1 {
		return addrs[0], nil
	}
	s := New(addrs)
	return s.Target(), s.DialOptions()
}

// Set is a list of frontends that a connection balances over and that
// Update changes while it is open.
type Set struct{ r *manual.Resolver }

// New returns the Set of addrs.
func New(addrs []string) *Set {
	s := &Set{r: manual.NewBuilderWithScheme(scheme)}
	s.r.InitialState(state(addrs))
	return s
}

// Target is the gRPC target to give the client (client.Options.HostPort).
func (s *Set) Target() string { return scheme + ":///temporal" }

// DialOptions are the options that make the target resolve to the Set.
func (s *Set) DialOptions() []grpc.DialOption { return []grpc.DialOption{grpc.WithResolvers(s.r)} }

// Update makes the connection balance over addrs from now on: those gone
// are closed, new ones connected.
func (s *Set) Update(addrs []string) { s.r.UpdateState(state(addrs)) }

func state(addrs []string) resolver.State {
	var st resolver.State
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	return st
}
