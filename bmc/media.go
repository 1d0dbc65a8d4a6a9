package bmc

import (
	"context"
	"net/url"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// Media mounts an ISO on a machine through its BMC's virtual media. It is
// optional: a driver without it (IPMI) has no virtual media, and the site
// says UNSUPPORTED before it sends anything.
type Media interface {
	// InsertMedia mounts the image at url (which the BMC fetches itself) on
	// the BMC's CD/DVD virtual media, confirms the BMC reports it inserted,
	// and makes the machine boot from it once, at its next boot. Safe to
	// call twice: a drive that holds url already is left as it is; one that
	// holds another image is ejected first.
	InsertMedia(ctx context.Context, url string) error
	// EjectMedia empties every CD/DVD virtual media drive and disables a
	// boot override to cd, so the machine does not boot the empty drive.
	// Safe to call twice: an empty drive is left alone.
	EjectMedia(ctx context.Context) error
}

// maxMediaURL bounds an image URL; BMCs keep it in small buffers.
const maxMediaURL = 1024

// ParseMediaURL checks an image URL for InsertMedia, or returns INVALID_INPUT
// naming field: http or https with a host, no credentials (the BMC would
// show them in its Image property), nothing a BMC cannot store.
func ParseMediaURL(field, raw string) (string, error) {
	if raw == "" {
		return "", errs.Invalid(field, "give the URL of the ISO image, http:// or https://")
	}
	if len(raw) > maxMediaURL {
		return "", errs.Invalid(field, "the image URL is %d bytes long; the limit is %d", len(raw), maxMediaURL)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			return "", errs.Invalid(field, "the image URL holds byte %#x at %d; percent-encode it", raw[i], i)
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", errs.Invalid(field, "the image URL does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errs.Invalid(field, "the image URL must be http:// or https://, not %q", strings.ToLower(u.Scheme)+":")
	case u.User != nil:
		return "", errs.Invalid(field, "the image URL holds credentials; a BMC shows its image URL to anyone who can read it")
	case u.Hostname() == "":
		return "", errs.Invalid(field, "the image URL has no host")
	case u.Fragment != "":
		return "", errs.Invalid(field, "the image URL has a fragment (#…), which the BMC would not send")
	}
	return raw, nil
}
