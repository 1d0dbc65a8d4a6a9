// Package ids makes the prefixed, sortable identifiers of better-compute
// (site_01k5w…, pool_…, img_…, node_…): a prefix, an underscore and a ULID-style
// 26-character lowercase Crockford base32 value, 48 bits of milliseconds then
// 80 random bits, so ids sort by creation time.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// Prefixes of the kinds of object.
const (
	Site      = "site"
	SiteToken = "stok"
	Pool      = "pool"
	Image     = "img"
	Node      = "node"
	Tenant    = "tnt"
	APIToken  = "tok"
	Command   = "cmd"
	JoinToken = "jtok"
	Agent     = "agent"
	Wipe      = "wipe"
)

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// New returns a new id with prefix p.
func New(p string) string { return NewAt(p, time.Now()) }

// NewAt returns a new id with prefix p for time t.
func NewAt(p string, t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return p + "_" + encode(b)
}

func encode(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Valid reports whether s is a well-formed id with prefix p.
func Valid(p, s string) bool {
	rest, ok := strings.CutPrefix(s, p+"_")
	if !ok || len(rest) != 26 || rest[0] > '7' {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(alphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}
