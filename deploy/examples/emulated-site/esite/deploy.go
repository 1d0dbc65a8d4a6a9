package esite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
)

const (
	osProfile = "emulated-site-os"
	// osMarker starts the line the image's /init (osinit) prints on the
	// console, followed by " on <product UUID>".
	osMarker = "better-compute emulated-site OS: up"
	osBound  = 3 * time.Minute // deployed → the OS seen on the console
)

// registerImage serves the OS image file over HTTP on the namespace's
// loopback, as an operator's image store would, and registers it and a
// deploy profile that writes it and boots the machine from its disk (the
// ramdisk has no filesystem modules for boot.kexec; the firmware boots
// the image's own boot loader).
func (s *site) registerImage(ctx context.Context) error {
	b, err := os.ReadFile(s.cfg.Image)
	if err != nil {
		return fmt.Errorf("the OS image (task emulated-site-image builds it): %w", err)
	}
	sum := sha256.Sum256(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /os.raw.zst", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, s.cfg.Image)
	})
	s.images = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.images.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("image store stopped", "err", err)
		}
	}()
	img, err := s.api.Images.Register(ctx, connect.NewRequest(&v1.RegisterImageRequest{Name: "emulated-site-os",
		Source: "http://" + ln.Addr().String() + "/os.raw.zst", Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Format: "raw", Compression: "zstd", Size: int64(len(b))}))
	if err != nil {
		return fmt.Errorf("images.register: %w", err)
	}
	steps := []struct {
		use  string
		with map[string]any
	}{
		{"deploy.image", map[string]any{"image": img.Msg.Image.Id}},
		{"management.setBootDevice", map[string]any{"device": "disk"}},
		{"power.setPower", map[string]any{"action": "cycle"}},
	}
	p := &v1.Profile{Id: osProfile, Version: 1, Target: "metal", Role: "host"}
	for _, st := range steps {
		with, err := structpb.NewStruct(st.with)
		if err != nil {
			return err
		}
		p.Steps = append(p.Steps, &v1.ProfileStep{Use: st.use, With: with})
	}
	if _, err := s.api.Profiles.Create(ctx, connect.NewRequest(&v1.CreateProfileRequest{Profile: p})); err != nil {
		return fmt.Errorf("profiles.create: %w", err)
	}
	s.say("image %s (%d MiB zstd) and profile %s v1 registered", img.Msg.Image.Id, len(b)>>20, osProfile)
	return nil
}

// deployAndRelease deploys the OS on a ready machine, waits until its
// console shows the OS up on this machine, then undeploys it (quick wipe)
// back to ready.
func (s *site) deployAndRelease(ctx context.Context, m *machine, r *MachineResult) error {
	name := m.spec.Name
	start := time.Now()
	if _, err := s.api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: r.Node, Profile: osProfile, ProfileVersion: 1})); err != nil {
		return fmt.Errorf("metal.deploy: %w", err)
	}
	var err error
	if r.State, err = s.wait(ctx, name, r.Node, "deployed"); err != nil {
		return err
	}
	r.DeployToDeployed = time.Since(start)
	line := osMarker + " on " + strings.ToLower(m.q.Config().UUID)
	up, err := waitConsole(ctx, m.q.Config().Console, line, osBound)
	if err != nil {
		return err
	}
	r.DeployToOSUp = up.Sub(start)
	s.say("%s: the OS runs: its console says %q, %s after the deploy began", name, line, r.DeployToOSUp.Round(100*time.Millisecond))
	start = time.Now()
	if _, err := s.api.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: r.Node, Wipe: "quick"})); err != nil {
		return fmt.Errorf("metal.undeploy: %w", err)
	}
	if r.State, err = s.wait(ctx, name, r.Node, "ready"); err != nil {
		return err
	}
	r.UndeployToReady = time.Since(start)
	return nil
}

// waitConsole waits until the console file contains line; the time it was
// first seen.
func waitConsole(ctx context.Context, path, line string, bound time.Duration) (time.Time, error) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), line) {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("the console %s did not show %q within %v", path, line, bound)
}
