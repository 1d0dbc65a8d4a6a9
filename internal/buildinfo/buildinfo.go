// Package buildinfo owns what a binary says about itself (`--version`): the
// module version, the VCS commit and the Go version, read from the build
// information the Go toolchain embeds.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what a binary was built from.
type Info struct {
	Version   string // the main module's version, "(devel)" for a build in the checkout
	Commit    string // vcs.revision, "unknown" when built without VCS stamping
	Modified  bool   // the work tree had uncommitted changes
	GoVersion string
}

// Read returns this binary's build information.
func Read() Info {
	in := Info{Version: "(devel)", Commit: "unknown", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the version line: "v1.2.3 (commit 0123abc, go1.27.3)", with
// "+modified" after a commit built from a changed work tree.
func (in Info) String() string {
	commit := in.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if in.Modified {
		commit += "+modified"
	}
	var b strings.Builder
	b.WriteString(in.Version)
	b.WriteString(" (commit ")
	b.WriteString(commit)
	b.WriteString(", ")
	b.WriteString(in.GoVersion)
	b.WriteString(")")
	return b.String()
}
