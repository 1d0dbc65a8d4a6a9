package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// serverUser is the account that runs PostgreSQL when we are root: initdb, pg_ctl
// and postgres all refuse to run as root. Debian's postgresql-15 package creates it.
const serverUser = "postgres"

// account is who runs initdb, pg_ctl and postgres.
type account struct {
	uid, gid int
	cred     *syscall.Credential // nil: run as ourselves
	caps     []uintptr           // ambient capabilities to grant the programs
}

// chooseAccount returns ourselves when we are not root. As root it returns the
// postgres user, created if missing, and grants it CAP_DAC_READ_SEARCH when it
// could not otherwise reach dir (a t.TempDir() sits below root-only 0700
// directories): the capability lets it enter and read directories, nothing more.
func chooseAccount(ctx context.Context, dir string) (account, error) {
	if os.Geteuid() != 0 {
		return account{uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return account{}, errs.Wrap(errs.Internal, err, "look up the %s user", serverUser)
		}
		if u, err = createServerUser(ctx); err != nil {
			return account{}, err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	a := account{
		uid:  uid,
		gid:  gid,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
	}
	if !reachable(filepath.Dir(dir), uid, gid) {
		a.caps = []uintptr{unix.CAP_DAC_READ_SEARCH}
	}
	return a, nil
}

// createServerUser adds the postgres system user, as Debian's package would.
func createServerUser(ctx context.Context) (*user.User, error) {
	out, err := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", serverUser).CombinedOutput()
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err,
			"PostgreSQL refuses to run as root and there is no %s user; creating one failed (%s): "+
				"install the Debian package postgresql-15, which creates it", serverUser, out)
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "look up the %s user after creating it", serverUser)
	}
	return u, nil
}

// reachable reports whether uid/gid (without supplementary groups) may search every
// directory from / down to dir.
func reachable(dir string, uid, gid int) bool {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			return false
		}
		mode := st.Mode
		switch {
		case int(st.Uid) == uid:
			mode &= 0o100
		case int(st.Gid) == gid:
			mode &= 0o010
		default:
			mode &= 0o001
		}
		if mode == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// command returns cmd name args run as the account, with a small fixed environment:
// no PG* variables of ours leak into the cluster's programs.
func (a account) command(ctx context.Context, bins binaries, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"PATH=" + bins.dir + ":/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}
	cmd.Dir = "/"
	if a.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cred, AmbientCaps: a.caps}
	}
	return cmd
}

// own hands path to the account when it is not us.
func (a account) own(path string) error {
	if a.cred == nil {
		return nil
	}
	if err := os.Chown(path, a.uid, a.gid); err != nil {
		return errs.Wrap(errs.Internal, err, "give %s to the %s user", path, serverUser)
	}
	return nil
}
