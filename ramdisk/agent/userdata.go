package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// writeUserData fetches the node's rendered user data, a NoCloud seed the
// control plane published behind the site (userdata.render), from the
// site's boot listener and writes it to a cidata partition after the image
// just written (disk.WriteSeed), where the deployed OS's cloud-init finds
// it. A partition rather than files in the deployed root: the ramdisk
// mounts no file system of the image (whatever it is), and the image's own
// partitions stay byte for byte what the catalog digest says. The seed is
// never logged: it may hold a join token.
func (a *agent) writeUserData(ctx context.Context, in kinds.DeployImageInput, d disk.Disk) error {
	if in.UserDataRef == "" {
		return nil
	}
	if len(in.UserDataSHA256) != sha256.Size*2 {
		return errs.Invalid("userDataSha256", "the user data's digest is 64 hex digits, got %d characters", len(in.UserDataSHA256))
	}
	src, err := a.imageURL(in.UserDataRef)
	if err != nil {
		return err
	}
	seed, err := fetchSeed(ctx, src)
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(seed); hex.EncodeToString(sum[:]) != in.UserDataSHA256 {
		return errs.New(errs.DriverError, "the user data the site served does not match its digest")
	}
	if err := disk.WriteSeed(d, seed); err != nil {
		return err
	}
	a.log.Info("ramdisk: user data written", "disk", d.Name, "partition", disk.SeedLabel, "bytes", len(seed))
	return nil
}

// fetchSeed GETs the seed, at most disk.MaxSeedBytes; an error never names
// its URL (the unguessable path is its only key).
func fetchSeed(ctx context.Context, src string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "build the user data request")
	}
	resp, err := http.DefaultClient.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // *url.Error repeats the URL
	}
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "fetch the user data from the site")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(http.MethodGet, "the user data", resp.StatusCode, nil)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, disk.MaxSeedBytes+1))
	switch {
	case err != nil:
		return nil, errs.Wrap(errs.Unavailable, err, "read the user data from the site")
	case len(b) > disk.MaxSeedBytes:
		return nil, errs.New(errs.DriverError, "the site served more than %d bytes of user data", disk.MaxSeedBytes)
	}
	return b, nil
}
