package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// download fetches in.Source into the cache as sha256/<want>, verifying size
// and digest before the rename.
func (c *Cache) download(ctx context.Context, want string, in kinds.EnsureImageInput, progress func(int64)) (kinds.EnsureImageOutput, error) {
	src, err := url.Parse(in.Source)
	if err != nil || (src.Scheme != "http" && src.Scheme != "https") || src.Host == "" {
		return kinds.EnsureImageOutput{}, errs.Invalid("source", "image source must be an http or https URL")
	}
	shown := redact(src)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.Source, nil)
	if err != nil {
		return kinds.EnsureImageOutput{}, errs.Invalid("source", "bad image source %s: %v", shown, err)
	}
	c.log.Info("downloading image", "image", in.ImageID, "source", shown, "digest", want)
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return kinds.EnsureImageOutput{}, ctx.Err()
		}
		return kinds.EnsureImageOutput{}, errs.New(errs.DriverError, "cannot fetch image %s from %s: %v", in.ImageID, shown, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if gone(resp.StatusCode) {
		return kinds.EnsureImageOutput{}, errs.New(errs.InvalidInput,
			"image %s's source %s answered HTTP %s: register the image again with the right --source (images register) and deploy a profile that names it", in.ImageID, shown, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return kinds.EnsureImageOutput{}, errs.New(errs.DriverError, "fetching image %s from %s: HTTP %s", in.ImageID, shown, resp.Status)
	}
	f, err := os.CreateTemp(filepath.Join(c.dir, "tmp"), want+".*")
	if err != nil {
		return kinds.EnsureImageOutput{}, errs.Wrap(errs.Internal, err, "cannot create a temporary file in the image cache")
	}
	tmp := f.Name()
	defer os.Remove(tmp) // nothing after a successful rename
	n, sum, err := copyHashing(f, resp.Body, in.Size, progress)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = errs.Wrap(errs.Internal, cerr, "cannot write the image to the cache")
	}
	if err != nil {
		if ctx.Err() != nil {
			return kinds.EnsureImageOutput{}, ctx.Err()
		}
		return kinds.EnsureImageOutput{}, err
	}
	if err := mismatch(in, shown, n, sum, want); err != nil {
		return kinds.EnsureImageOutput{}, err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return kinds.EnsureImageOutput{}, errs.Wrap(errs.Internal, err, "cannot publish the image")
	}
	if err := os.Rename(tmp, c.Path(want)); err != nil {
		return kinds.EnsureImageOutput{}, errs.Wrap(errs.Internal, err, "cannot publish the image")
	}
	progress(n)
	c.log.Info("image verified", "image", in.ImageID, "digest", want, "bytes", n)
	return kinds.EnsureImageOutput{Path: PathPrefix + want, Size: n}, nil
}

// mismatch says what is wrong when a whole download of n bytes hashing to
// sum is not the catalog's image (want, in.Size), nil when it is. A source
// that ended early without an error is a broken download, which a retry may
// mend (DRIVER_ERROR). A whole file that is not the image is what the source
// serves: every retry would fetch the same bytes (8 attempts over about a
// minute and a half before the deploy was refused), so it is INVALID_INPUT
// at once, naming the catalog entry to fix.
func mismatch(in kinds.EnsureImageInput, shown string, n int64, sum, want string) error {
	const fix = "fix the source or register the image again with the right --digest and --size (images register), then deploy a profile that names it; the file was deleted"
	switch {
	case in.Size > 0 && n < in.Size && sum != want:
		return errs.New(errs.DriverError, "the download of image %s from %s ended after %d of its %d bytes; the file was deleted",
			in.ImageID, shown, n, in.Size)
	case in.Size > 0 && n > in.Size:
		return errs.New(errs.InvalidInput, "image %s from %s is longer than the %d bytes the catalog says: %s", in.ImageID, shown, in.Size, fix)
	case in.Size > 0 && n != in.Size:
		return errs.New(errs.InvalidInput, "image %s from %s has the catalog's sha256 but is %d bytes, the catalog says %d: %s",
			in.ImageID, shown, n, in.Size, fix)
	case sum != want:
		return errs.New(errs.InvalidInput, "image %s from %s has sha256 %s, the catalog says sha256 %s: %s", in.ImageID, shown, sum, want, fix)
	}
	return nil
}

// copyHashing copies src to f, hashing and counting; with size > 0 it reads
// at most size+1 bytes, enough to tell a too-long source.
func copyHashing(f *os.File, src io.Reader, size int64, progress func(int64)) (int64, string, error) {
	if size > 0 {
		src = io.LimitReader(src, size+1)
	}
	h := sha256.New()
	cw := &counter{h: h, progress: progress}
	n, err := io.Copy(io.MultiWriter(f, cw), src)
	if err != nil {
		return n, "", errs.Wrap(errs.DriverError, err, "the image download broke off after %d bytes", n)
	}
	if err := f.Sync(); err != nil {
		return n, "", errs.Wrap(errs.Internal, err, "cannot sync the image to disk")
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// counter hashes what passes and reports the running count every MiB.
type counter struct {
	h        hash.Hash
	n, last  int64
	progress func(int64)
}

func (c *counter) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	if c.n-c.last >= 1<<20 {
		c.last = c.n
		c.progress(c.n)
	}
	return len(p), nil
}

// redact returns the URL without user info or query, which may hold
// credentials (presigned URLs).
func redact(u *url.URL) string {
	r := *u
	r.User, r.RawQuery, r.Fragment = nil, "", ""
	return r.String()
}

// unwrapURLError drops *url.Error's repetition of the full URL.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// gone: the source answered that the image is not there, or not for us,
// which no retry mends (not 408 or 429: those ask for one).
func gone(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}
