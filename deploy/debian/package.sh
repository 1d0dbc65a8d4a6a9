#!/usr/bin/env bash
# package.sh OUTDIR: the Debian package OUTDIR/better-compute_<version>_<arch>.deb,
# built with nfpm from deploy/debian/nfpm.yaml (task package runs it; so does
# the package's test). The binaries are built with the Go toolchain's VCS
# stamping on, so `--version` says the module version and commit of this
# checkout, and the package's version is that same module version
# (v1.2.3 -> 1.2.3; a pseudo-version v0.0.0-20261202170803-4f8ea49cba88+dirty
# -> 0.0.0~20261202170803.4f8ea49cba88+dirty, which sorts before its release).
set -euo pipefail
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0

out=${1:?usage: package.sh OUTDIR}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

# -buildvcs=true: this machine's go env sets -buildvcs=false, which leaves
# --version at "(devel)"; bcd without fakehw: a real site drives real disks.
for cmd in better-compute bcd; do
  CGO_ENABLED=0 go build -buildvcs=true -trimpath -ldflags='-s -w' -o "$bin/$cmd" "./cmd/$cmd"
done

gover=$(go version -m "$bin/better-compute" | awk '$1 == "mod" { print $3 }')
case "$gover" in
v[0-9]*) ;;
*) echo "package.sh: better-compute was built without a VCS version ($gover): build in a git checkout" >&2; exit 1 ;;
esac
debver=${gover#v}
case "$debver" in
*-*) pre=${debver#*-}; debver="${debver%%-*}~${pre//-/.}" ;;
esac

BC_BIN_DIR=$bin BC_DEB_VERSION=$debver BC_DEB_ARCH=$(go env GOARCH) \
  go run "$NFPM" package --config deploy/debian/nfpm.yaml --packager deb --target "$out/"
