package agent

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestFetchSeedErrorHidesURL: the seed's unguessable path is its only key,
// so a failed fetch's error (a command's result) does not hold it.
func TestFetchSeedErrorHidesURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the fetch fails to connect
	const secretPath = "/artifacts/unguessableunguessableunguessable/cidata.iso"
	_, err = fetchSeed(context.Background(), "http://"+addr+secretPath)
	if err == nil || strings.Contains(err.Error(), "unguessable") {
		t.Errorf("fetchSeed(unreachable) = %v, want an error without the URL's path", err)
	}
}
