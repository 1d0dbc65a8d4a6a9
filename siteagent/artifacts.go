package siteagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/siteagent/artifacts"
)

// ArtifactsDirName is where published artifacts are cached, in the data dir.
const ArtifactsDirName = "artifacts"

// The control plane's artifact endpoints on its agents' listener (api
// artifacts), and the headers of a fetched artifact.
const (
	artifactsFetchPath = "/v1/artifacts/"
	artifactsBasePath  = "/v1/artifacts/base"
	maxArtifactBytes   = 64 << 20
)

// artifactsHandler opens the artifact cache and returns its handler for
// the boot listener.
func (a *Agent) artifactsHandler() (http.Handler, error) {
	c, err := artifacts.New(filepath.Join(a.cfg.DataDir, ArtifactsDirName), a.fetchArtifact, a.cfg.Now, a.log)
	if err != nil {
		return nil, err
	}
	return c.Handler(), nil
}

// fetchArtifact fetches one of this site's artifacts from the control plane
// over the agent's mTLS client.
func (a *Agent) fetchArtifact(ctx context.Context, id string) (artifacts.Meta, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.ControlPlaneURL+artifactsFetchPath+id, nil)
	if err != nil {
		return artifacts.Meta{}, nil, errs.Wrap(errs.Internal, err, "cannot build the artifact request")
	}
	resp, err := a.cp.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // *url.Error repeats the URL, whose id is the artifact's key
	}
	if err != nil {
		return artifacts.Meta{}, nil, errs.Wrap(errs.Unavailable, err, "cannot reach the control plane for an artifact")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return artifacts.Meta{}, nil, answerError(resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxArtifactBytes+1))
	if err != nil || len(data) > maxArtifactBytes {
		return artifacts.Meta{}, nil, errs.New(errs.Unavailable, "cannot read the artifact from the control plane (at most %d bytes)", maxArtifactBytes)
	}
	exp, err := time.Parse(time.RFC3339Nano, resp.Header.Get("X-Bc-Artifact-Expires"))
	if err != nil {
		return artifacts.Meta{}, nil, errs.New(errs.DriverError, "the control plane gave an artifact without its expiry")
	}
	return artifacts.Meta{Name: resp.Header.Get("X-Bc-Artifact-Name"), SHA256: resp.Header.Get("X-Bc-Artifact-Sha256"), ExpiresAt: exp}, data, nil
}

// setArtifactsBase tells the control plane where this agent serves
// artifacts (its boot listener), so a step's URL names it.
func (a *Agent) setArtifactsBase(ctx context.Context) error {
	body, _ := json.Marshal(map[string]string{"url": a.bootURL})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, a.cfg.ControlPlaneURL+artifactsBasePath, bytes.NewReader(body))
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot build the request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.cp.Do(req)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot reach the control plane")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return answerError(resp)
	}
	return nil
}

// keepArtifactsBase says where artifacts are served until the control
// plane took it (or ctx ends), retrying every minute: steps cannot publish
// for this site until then.
func (a *Agent) keepArtifactsBase(ctx context.Context) {
	for {
		err := a.setArtifactsBase(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		a.log.Warn("cannot tell the control plane where this agent serves artifacts; retrying in a minute", "url", a.bootURL, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}

// answerError turns the control plane's JSON error answer into ours.
func answerError(resp *http.Response) error {
	var e struct{ Kind, Error string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Kind == "" {
		return errs.New(errs.Unavailable, "the control plane answered %s", resp.Status)
	}
	return errs.New(errs.Kind(e.Kind), "%s", e.Error)
}
