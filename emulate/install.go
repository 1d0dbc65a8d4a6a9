package emulate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk/iso"
)

// Booting from virtual media runs a fake installer, as an autoinstall ISO
// would run Ubuntu's (deploy/examples/autoinstall): it fetches the image
// the BMC's CD drive holds, reads its cidata user data, does the one
// late-command the installed machine depends on (writing the provisioned
// join token to /etc/bcd/join-token), marks the first disk as holding an
// OS, and boots that OS, whose bcd node joins with the token
// (Config.NodeAgent). An empty drive falls through to the disk, as
// firmware does.

// InstalledNode is what the installed OS hands its node agent.
type InstalledNode struct {
	Machine     string
	ProductUUID string
	MACs        []string
	// Root is the installed OS's root directory, made afresh by each
	// install: the installer wrote the single-use provisioned token to
	// Root/etc/bcd/join-token (0600; a secret, never logged), and the
	// agent keeps its state under Root (JoinTokenPath, NodeDataDir).
	Root string
}

// JoinTokenPath is where the installer wrote the join token.
func (n InstalledNode) JoinTokenPath() string {
	return filepath.Join(n.Root, "etc", "bcd", "join-token")
}

// NodeDataDir is the node agent's data dir (bcd node's default, under Root).
func (n InstalledNode) NodeDataDir() string { return filepath.Join(n.Root, "var", "lib", "bcd-node") }

// maxISO bounds the image the installer fetches (a cidata ISO is a few KiB).
const maxISO = 64 << 20

// joinTokenCommand is the late-command that writes the join token.
var joinTokenCommand = regexp.MustCompile(`echo\s+(\S+)\s*>\s*/etc/bcd/join-token`)

// bootCD boots the machine from its virtual CD. Callers hold bootMu.
func (m *machine) bootCD() {
	url := m.bmc.media()
	if url == "" {
		m.log.Info("emulate: boot from cd finds no virtual media; booting from disk")
		m.bootOS(false)
		return
	}
	n, err := m.install(url)
	if err != nil {
		m.log.Warn("emulate: the installer failed; booting from disk", "err", err)
		m.setError(err.Error())
		m.bootOS(false)
		return
	}
	m.bootOS(false)
	m.startNodeAgent(n)
}

// install runs the fake installer from the ISO at url and returns the
// installed OS.
func (m *machine) install(url string) (InstalledNode, error) {
	img, err := m.fetchISO(url)
	if err != nil {
		return InstalledNode{}, err
	}
	userData, err := iso.ReadFile(bytes.NewReader(img), "user-data")
	if err != nil {
		return InstalledNode{}, errs.Wrap(errs.InvalidInput, err, "the virtual media's image holds no cidata user-data")
	}
	match := joinTokenCommand.FindSubmatch(userData)
	if match == nil {
		return InstalledNode{}, errs.New(errs.InvalidInput, "the autoinstall user data writes no /etc/bcd/join-token")
	}
	if len(m.disks) == 0 {
		return InstalledNode{}, errs.New(errs.InvalidState, "the machine has no disk to install on")
	}
	if err := writeInstalledOS(m.disks[0].Path, m.name); err != nil {
		return InstalledNode{}, err
	}
	n := InstalledNode{Machine: m.name, ProductUUID: m.id.UUID, MACs: append([]string(nil), m.id.MACs...), Root: filepath.Join(m.dir, "os")}
	tok := string(match[1])
	if err := writeRoot(n, tok); err != nil {
		return InstalledNode{}, err
	}
	m.mu.Lock()
	m.st.Installs++
	m.st.InstallTokens = append(m.st.InstallTokens, tok)
	m.mu.Unlock()
	m.log.Info("emulate: the installer installed the OS from virtual media")
	return n, nil
}

// writeRoot makes the installed OS's root afresh, with the join token the
// late-command writes (mode 0600, as its chmod).
func writeRoot(n InstalledNode, tok string) error {
	if err := os.RemoveAll(n.Root); err != nil {
		return errs.Wrap(errs.Internal, err, "clear the installed OS's root")
	}
	if err := os.MkdirAll(filepath.Dir(n.JoinTokenPath()), 0o700); err != nil {
		return errs.Wrap(errs.Internal, err, "make the installed OS's /etc/bcd")
	}
	if err := os.WriteFile(n.JoinTokenPath(), []byte(tok+"\n"), 0o600); err != nil {
		return errs.Wrap(errs.Internal, err, "write the installed OS's join token")
	}
	return nil
}

// fetchISO downloads the image the CD drive holds, as the BMC streams it.
func (m *machine) fetchISO(url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(m.rack.ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "the virtual media's image URL")
	}
	resp, err := m.rack.client.Do(req)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "fetch the virtual media's image")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errs.New(errs.Unavailable, "fetch the virtual media's image: %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxISO+1))
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "fetch the virtual media's image")
	}
	if len(b) > maxISO {
		return nil, errs.New(errs.InvalidInput, "the virtual media's image is over %d bytes", maxISO)
	}
	return b, nil
}

// writeInstalledOS puts the installed OS's first bytes on the disk, so the
// disk holds an image until a wipe zeroes it.
func writeInstalledOS(path, machine string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "open the disk to install on")
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(fmt.Sprintf("emulated Ubuntu, autoinstalled on %s\n", machine)), 0); err != nil {
		return errs.Wrap(errs.Internal, err, "install on %s", path)
	}
	return f.Sync()
}

// startNodeAgent runs the installed OS's bcd node until the machine powers
// off or boots again. Callers hold bootMu.
func (m *machine) startNodeAgent(n InstalledNode) {
	run := m.rack.cfg.NodeAgent
	if run == nil {
		m.setError("the installed OS has no node agent to run (emulate.Config.NodeAgent)")
		return
	}
	ctx, cancel := context.WithCancel(m.rack.ctx)
	done := make(chan struct{})
	m.mu.Lock()
	m.stopRD, m.rdDone = cancel, done // the running software, stopped as a ramdisk is
	m.st.NodeAgentRuns++
	m.mu.Unlock()
	m.rack.wg.Add(1)
	go func() {
		defer m.rack.wg.Done()
		defer close(done)
		if err := run(ctx, n); err != nil && ctx.Err() == nil {
			m.log.Warn("emulate: the node agent stopped", "err", err)
			m.setError(err.Error())
		}
	}()
}
