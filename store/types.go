package store

import (
	"encoding/json"
	"time"
)

// Site is a place with machines and one or more site agents. Key, when set, makes
// its creation idempotent within the tenant.
type Site struct {
	ID, TenantID, Kind, Region, Key string
	// LoopbackLab marks a lab whose agent shares a host with the control
	// plane: only its agent may be certified for loopback names.
	LoopbackLab bool
	// ServeHosts are the names and addresses the site's agent declared at
	// its join; its serving certificates name only these.
	ServeHosts []string
	// BMCDrivers are the drivers the site's agent announced at its last
	// start (none: no agent announced yet).
	BMCDrivers []string
	CreatedAt  time.Time
}

// SiteToken lets a site agent join its site once. The token itself is never
// stored, only its hash.
type SiteToken struct {
	ID, TenantID, SiteID, Key string
	ExpiresAt, CreatedAt      time.Time
	UsedAt                    *time.Time
}

// PoolPolicy is the policy document of a pool (stored as jsonb).
type PoolPolicy struct {
	HardwareProfile          string   `json:"hardwareProfile,omitempty"`
	TrustProvisioningNetwork bool     `json:"trustProvisioningNetwork,omitempty"`
	AllowUnverifiedRelease   bool     `json:"allowUnverifiedRelease,omitempty"`
	ProvisioningCidrs        []string `json:"provisioningCidrs,omitempty"`
}

// Pool groups machines of one class on one site under one policy.
type Pool struct {
	ID, TenantID, SiteID, Class, Agent string
	Policy                             PoolPolicy
	CreatedAt                          time.Time
}

// Image is a catalog entry for an OS image.
type Image struct {
	ID, TenantID, Name, Source, Digest, Format, Compression string
	Size                                                    int64
	CreatedAt                                               time.Time
}

// Profile is one version of a provision profile. Document is stored as jsonb, so
// it comes back with PostgreSQL's normalized spacing and key order.
type Profile struct {
	TenantID, ID string
	Version      int
	Document     json.RawMessage
	Visibility   string
	CreatedAt    time.Time
}
