package redfishbmc

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// session is one Redfish login.
type session struct {
	id, user string
}

// maxBody bounds request bodies; Redfish writes are small.
const maxBody = 64 << 10

// ServeHTTP answers Redfish requests.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := trimSlash(r.URL.Path)
	b.mu.Lock()
	b.requests++
	b.mu.Unlock()
	w.Header().Set("OData-Version", "4.0")
	if b.fault(w, r) {
		return
	}
	if p == "/redfish" && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, map[string]any{"v1": rootPath + "/"})
		return
	}
	if !b.public(r.Method, p) && !b.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Redfish"`)
		writeError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "authentication required: give a valid session token or basic credentials")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		b.get(w, p)
	case r.Method == http.MethodPatch && p == b.systemPath:
		b.patchSystem(w, r)
	case r.Method == http.MethodPost && p == b.resetPath:
		b.postReset(w, r)
	case r.Method == http.MethodPost && p == b.sessionsPath:
		b.login(w, r)
	case r.Method == http.MethodPost && b.isMediaAction(p):
		drive, act, _ := b.mediaAction(p)
		b.postMedia(w, r, drive, act)
	case r.Method == http.MethodDelete && strings.HasPrefix(p, b.sessionsPath+"/"):
		b.logout(w, strings.TrimPrefix(p, b.sessionsPath+"/"))
	default:
		writeError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", r.Method+" is not allowed on "+p)
	}
}

// public reports whether a request needs no authentication: the service root,
// its metadata and the login itself, as the Redfish specification requires.
func (b *BMC) public(method, p string) bool {
	switch {
	case method == http.MethodGet && (p == rootPath || p == rootPath+"/odata" || p == rootPath+"/$metadata"):
		return true
	case method == http.MethodPost && p == b.sessionsPath:
		return true
	}
	return false
}

func (b *BMC) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		b.mu.Lock()
		_, ok := b.sessions[tok]
		b.mu.Unlock()
		return ok
	}
	user, pass, ok := r.BasicAuth()
	return ok && b.credentialsMatch(user, pass)
}

func (b *BMC) credentialsMatch(user, pass string) bool {
	u := subtle.ConstantTimeCompare([]byte(user), []byte(b.cfg.Username))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(b.cfg.Password))
	return u&p == 1
}

func (b *BMC) get(w http.ResponseWriter, p string) {
	switch {
	case p == b.systemPath:
		writeJSON(w, http.StatusOK, b.renderSystem())
		return
	case p == b.sessionsPath:
		writeJSON(w, http.StatusOK, b.sessionCollection())
		return
	case b.media[p] != nil:
		writeJSON(w, http.StatusOK, b.renderMedia(p))
		return
	case strings.HasPrefix(p, b.sessionsPath+"/"):
		id := strings.TrimPrefix(p, b.sessionsPath+"/")
		if s, ok := b.sessionByID(id); ok {
			writeJSON(w, http.StatusOK, b.sessionResource(s))
			return
		}
	default:
		if res, ok := b.tree[p]; ok {
			writeJSON(w, http.StatusOK, res)
			return
		}
	}
	writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no resource at "+p)
}

func (b *BMC) patchSystem(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "the request body is not a JSON object")
		return
	}
	var boot map[string]any
	for k, v := range body {
		switch {
		case strings.HasPrefix(k, "@"):
		case k == "Boot":
			if err := json.Unmarshal(v, &boot); err != nil {
				writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueTypeError", "Boot must be an object")
				return
			}
		default:
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyNotWritable", "property "+k+" is not writable on this service")
			return
		}
	}
	if problem := b.patchBoot(boot); problem != "" {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", problem)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *BMC) postReset(w http.ResponseWriter, r *http.Request) {
	var body struct{ ResetType string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ResetType == "" {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "ComputerSystem.Reset needs a ResetType")
		return
	}
	if problem := b.reset(body.ResetType); problem != "" {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterNotSupported", problem)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// bootCall names a Boot PATCH as State.Calls lists it. The values were
// checked by patchBoot, so each present one is a string.
func bootCall(boot map[string]any) string {
	field := func(k string) string {
		if s, ok := boot[k].(string); ok {
			return s
		}
		return "-"
	}
	call := "boot:" + field("BootSourceOverrideTarget") + "/" + field("BootSourceOverrideEnabled")
	if mode, ok := boot["BootSourceOverrideMode"].(string); ok {
		call += "/" + mode
	}
	return call
}

func (b *BMC) login(w http.ResponseWriter, r *http.Request) {
	var body struct{ UserName, Password string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "a login needs UserName and Password")
		return
	}
	if !b.credentialsMatch(body.UserName, body.Password) {
		b.countLogin(false)
		writeError(w, http.StatusUnauthorized, "Base.1.8.InsufficientPrivilege", "wrong user name or password")
		return
	}
	s := session{id: randomHex(8), user: body.UserName}
	tok := randomHex(16)
	b.mu.Lock()
	full := b.sessionsFullLocked()
	if !full {
		b.sessions[tok] = s
	}
	b.mu.Unlock()
	if full {
		writeError(w, http.StatusServiceUnavailable, "Base.1.8.SessionLimitExceeded", sessionLimitMessage)
		return
	}
	b.countLogin(true)
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", b.sessionsPath+"/"+s.id)
	writeJSON(w, http.StatusCreated, b.sessionResource(s))
}

func (b *BMC) logout(w http.ResponseWriter, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for tok, s := range b.sessions {
		if s.id == id {
			delete(b.sessions, tok)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no session "+id)
}

func (b *BMC) sessionByID(id string) (session, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sessions {
		if s.id == id {
			return s, true
		}
	}
	return session{}, false
}

func (b *BMC) sessionCollection() map[string]any {
	b.mu.Lock()
	var paths []string
	for _, s := range b.sessions {
		paths = append(paths, b.sessionsPath+"/"+s.id)
	}
	b.mu.Unlock()
	return collection(b.sessionsPath, "SessionCollection", "Session Collection", paths...)
}

func (b *BMC) sessionResource(s session) map[string]any {
	return map[string]any{
		"@odata.id": b.sessionsPath + "/" + s.id, "@odata.type": "#Session.v1_6_0.Session",
		"Id": s.id, "Name": "User Session", "UserName": s.user,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

// writeError answers with a Redfish error body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": code, "message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": code, "Message": msg, "Severity": "Warning"}},
	}})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
