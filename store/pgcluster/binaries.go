package pgcluster

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// debianLibRoot is where Debian installs each PostgreSQL major version's programs,
// as <debianLibRoot>/<major>/bin.
const debianLibRoot = "/usr/lib/postgresql"

// binaries are the PostgreSQL server programs the cluster runs. All three come from
// one directory so that their versions match.
type binaries struct {
	dir      string // the real directory, symlinks resolved
	initdb   string
	pgCtl    string
	postgres string
}

// findBinaries looks for initdb, pg_ctl and postgres in the directories of path (a
// PATH-style list), then in the newest <libRoot>/<major>/bin. A program found through
// a symlink (/usr/local/bin/initdb → /usr/lib/postgresql/15/bin/initdb) stands for its
// real directory, which must hold the other two.
func findBinaries(path, libRoot string) (binaries, error) {
	candidates := filepath.SplitList(path)
	candidates = append(candidates, versionDirs(libRoot)...)
	for _, d := range candidates {
		if d == "" {
			continue
		}
		initdb, err := filepath.EvalSymlinks(filepath.Join(d, "initdb"))
		if err != nil || !isExecutable(initdb) {
			continue
		}
		real := filepath.Dir(initdb)
		b := binaries{
			dir:      real,
			initdb:   initdb,
			pgCtl:    filepath.Join(real, "pg_ctl"),
			postgres: filepath.Join(real, "postgres"),
		}
		if isExecutable(b.pgCtl) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	return binaries{}, errs.New(errs.Unavailable,
		"the PostgreSQL server programs (initdb, pg_ctl, postgres) are neither on PATH nor in %s/<version>/bin: "+
			"install the Debian package postgresql-15 (apt-get install -y postgresql-15)", libRoot).
		WithOp("pgcluster.start")
}

// versionDirs returns <libRoot>/<major>/bin for every installed major version,
// newest first.
func versionDirs(libRoot string) []string {
	entries, err := os.ReadDir(libRoot)
	if err != nil {
		return nil
	}
	type version struct {
		major, minor int
		name         string
	}
	var vs []version
	for _, e := range entries {
		// Majors are "15", "16"; before 10 they were "9.6".
		majorS, minorS, _ := strings.Cut(e.Name(), ".")
		major, err := strconv.Atoi(majorS)
		if err != nil {
			continue
		}
		minor, _ := strconv.Atoi(minorS)
		vs = append(vs, version{major, minor, e.Name()})
	}
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].major != vs[j].major {
			return vs[i].major > vs[j].major
		}
		return vs[i].minor > vs[j].minor
	})
	dirs := make([]string, len(vs))
	for i, v := range vs {
		dirs[i] = filepath.Join(libRoot, v.name, "bin")
	}
	return dirs
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
