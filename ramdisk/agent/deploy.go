package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// streamAttempts bounds how many tries in a row one deploy.image run makes
// at the image stream without getting further (the site's HTTP server away)
// before it reports UNAVAILABLE (a repeat of the same command id then
// resumes again). A stream that made more of the image durable before it
// broke starts the count and the backoff again: its break is a new outage,
// not more of the last one.
const streamAttempts = 5

// deployImage is deploy.image: stream the image from the site's boot
// listener onto the disk, digest-checked. Each offset WriteImage reports is
// kept under the command id, so a re-stream (within this run, or a repeat of
// the command after the site agent restarted) resumes from it.
func (a *agent) deployImage(ctx context.Context, cmd kinds.Command, p *tracker) (any, error) {
	var in kinds.DeployImageInput
	if err := decode(cmd, &in); err != nil {
		return nil, err
	}
	src, err := a.imageURL(in.Path)
	if err != nil {
		return nil, err
	}
	d, err := a.pickDisk(ctx, in.Disk)
	if err != nil {
		return nil, err
	}
	spec := disk.ImageSpec{Digest: in.Digest, Compression: in.Compression, Format: in.Format, Size: in.Size}
	var total int64
	if in.Compression == "" || in.Compression == "none" {
		total = in.Size
	}
	bo := backoff{max: a.cfg.MaxBackoff}
	for tries := 1; ; tries++ {
		from := a.resumeAt(cmd.ID)
		res, err := a.streamOnce(ctx, src, spec, d, from, func(n int64) {
			a.setResume(cmd.ID, n)
			p.set(d.Name, n, total)
		})
		if err == nil {
			if err := a.writeUserData(ctx, in, d); err != nil {
				return nil, err
			}
			return kinds.DeployImageOutput{Disk: d.Name, BytesWritten: res.ImageBytes, Digest: res.Digest}, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		if a.resumeAt(cmd.ID) > from {
			tries = 1
			bo.reset()
		}
		if tries == streamAttempts {
			return nil, errs.Wrap(errs.Unavailable, err, "image stream failed %d times in a row without getting further; send the command again to resume", tries)
		}
		a.log.Warn("ramdisk: image stream broke; resuming", "command", cmd.ID, "from", a.resumeAt(cmd.ID), "err", err)
		if !sleep(ctx, bo.next()) {
			return nil, ctx.Err()
		}
	}
}

// streamOnce GETs src and writes it. A failure of the connection (before or
// during the body) is UNAVAILABLE; the disk's own errors keep their kinds.
func (a *agent) streamOnce(ctx context.Context, src string, spec disk.ImageSpec, d disk.Disk, from int64, progress func(int64)) (disk.ImageResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return disk.ImageResult{}, errs.Wrap(errs.Internal, err, "build the image request")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return disk.ImageResult{}, errs.Wrap(errs.Unavailable, err, "fetch the image from the site")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return disk.ImageResult{}, statusError(http.MethodGet, req.URL.Path, resp.StatusCode, nil)
	}
	body := &watchedReader{r: resp.Body}
	res, err := disk.WriteImage(ctx, body, spec, d, from, progress)
	if err != nil && body.err != nil {
		return res, errs.Wrap(errs.Unavailable, err, "the image stream from the site broke")
	}
	if err == nil {
		a.log.Info("ramdisk: image written and verified", "disk", d.Name, "digest", res.Digest, "imageBytes", res.ImageBytes,
			"written", res.BytesWritten, "zeroed", res.BytesZeroed, "skipped", res.BytesSkipped, "took", res.Finished.Sub(res.Started))
	}
	return res, err
}

// watchedReader remembers a read error other than EOF, so a broken
// connection can be told from a bad image.
type watchedReader struct {
	r   io.Reader
	err error
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		w.err = err
	}
	return n, err
}

// imageURL resolves an image path against the site's boot listener.
func (a *agent) imageURL(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", errs.Invalid("path", "image path %q must be a path on the site's boot listener, e.g. /cache/sha256/<hex>", path)
	}
	if a.boot.BootURL == "" {
		return "", errs.New(errs.InvalidState, "the ramdisk does not know the site's boot listener: the kernel command line has no bc.boot")
	}
	return a.boot.BootURL + path, nil
}

// pickDisk returns the disk named name, or the first disk when name is "".
func (a *agent) pickDisk(ctx context.Context, name string) (disk.Disk, error) {
	disks, err := a.cfg.Disks.Enumerate(ctx)
	if err != nil {
		return disk.Disk{}, err
	}
	for _, d := range disks {
		if name == "" || d.Name == name {
			return d, nil
		}
	}
	if name == "" {
		return disk.Disk{}, errs.New(errs.InvalidState, "this machine has no disks")
	}
	return disk.Disk{}, errs.New(errs.NotFound, "disk %s is not on this machine; run inventory.refresh", name)
}

func (a *agent) resumeAt(id string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.resume[id]
}

func (a *agent) setResume(id string, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resume[id] = n
}
