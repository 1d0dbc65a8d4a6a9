package siteagent

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestFetchArtifactErrorHidesID: the artifact's id is its URL's only key,
// so a failed fetch's error (logged by the cache) does not hold it.
func TestFetchArtifactErrorHidesID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the fetch fails to connect
	a := &Agent{cfg: Config{ControlPlaneURL: "http://" + addr}, cp: &http.Client{}}
	id := strings.Repeat("q", 52)
	if _, _, err := a.fetchArtifact(context.Background(), id); err == nil || strings.Contains(err.Error(), id) {
		t.Errorf("fetchArtifact(unreachable) = %v, want an error without the id", err)
	}
}
