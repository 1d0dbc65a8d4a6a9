package redfishbmc

// dropSessions makes the BMC one without a SessionService: the service root
// links none, and with no sessions path a login POST falls through to 405.
func (b *BMC) dropSessions() {
	root := b.tree[rootPath]
	delete(root, "SessionService")
	if links, ok := root["Links"].(map[string]any); ok {
		delete(links, "Sessions")
	}
	for p := range b.tree {
		if p == sessionServicePath || p == b.sessionsPath {
			delete(b.tree, p)
		}
	}
	b.sessionsPath = "\x00none" // no request path holds a NUL
}

// countLogin counts a session login, accepted or refused.
func (b *BMC) countLogin(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.logins[0]++
	} else {
		b.logins[1]++
	}
}

// ExpireSessions ends every open session, as a BMC does when it restarts
// or its SessionTimeout passes: their tokens are refused from then on.
func (b *BMC) ExpireSessions() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.sessions)
}
