package kinds

// ActRenderUserData renders deploy.image's user data (internal/userdata)
// on the control plane and publishes it behind the node's site; the
// deploy then carries only where the site serves it.
const ActRenderUserData = "userdata.render"

// UserDataInput names a node's user data: Ref (secret://OWNER/NAME) of
// Owner, the tenant of the profile being deployed.
type UserDataInput struct {
	TenantID, NodeID string
	Owner, Ref       string
	// Field is the profile field Ref came from, which an error names.
	Field string
}

// UserDataOutput is where the node's site serves the rendered seed (a path
// of its boot listener, unguessable) and the seed's SHA-256 (hex): no
// user data and no token.
type UserDataOutput struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}
