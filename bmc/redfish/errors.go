package redfish

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/stmcginnis/gofish/common"
)

// fail turns an error from gofish or the network into a DRIVER_ERROR that names
// the BMC and the HTTP status and says what to do; a 401, and a certificate
// the node's TLS settings do not trust, are UNAUTHENTICATED.
// Our own errors pass through.
func (d *Driver) fail(op string, err error) error {
	if own, ok := errs.Own(err, op); ok {
		return own
	}
	err = firstFailure(err)
	host := d.addr.HostPort()
	e := &errs.Error{Kind: errs.DriverError, Op: op}
	var re *common.Error
	switch {
	case errors.As(err, &re):
		e.Msg, e.Reason = httpMessage(host, d.creds.Username, re), httpReason(re)
		if re.HTTPReturnedStatusCode == http.StatusUnauthorized {
			e.Kind = errs.Unauthenticated // final: retrying a wrong password can lock the BMC account
		}
	case errors.As(err, new(*tls.CertificateVerificationError)), errors.As(err, new(*bmc.PinMismatchError)):
		// Final: the BMC did not prove it is the one enrolled, and asking
		// again will not change its certificate; only the node's TLS
		// settings can. No credentials were sent.
		e.Kind, e.Msg, e.Err = errs.Unauthenticated, d.untrusted(err), err
	case errors.Is(err, context.DeadlineExceeded):
		e.Msg, e.Err, e.Reason = fmt.Sprintf("BMC %s did not answer in time: check that it is up and reachable from the site agent", host), err, bmc.ReasonUnreachable
	case errors.Is(err, context.Canceled):
		e.Msg, e.Err = fmt.Sprintf("the request to BMC %s was canceled", host), err
	default:
		var ne net.Error
		if errors.As(err, &ne) { // refused, reset, closed mid-TLS-handshake (EOF), timed out
			e.Msg, e.Err, e.Reason = fmt.Sprintf("cannot reach BMC %s: check its address and the site agent's network", host), err, bmc.ReasonUnreachable
		} else {
			e.Msg, e.Err = fmt.Sprintf("BMC %s answered something the Redfish driver cannot use", host), err
		}
	}
	d.log.Warn("redfish operation failed", "op", op, "err", e.Error())
	return e
}

// untrusted says why the BMC's certificate was refused and which enroll
// flag fixes it, with the pin of the key it presented so an operator can
// compare it with the BMC's own console before trusting it.
func (d *Driver) untrusted(err error) string {
	host := d.addr.HostPort()
	var pm *bmc.PinMismatchError
	if errors.As(err, &pm) {
		return fmt.Sprintf("BMC %s presented a TLS key whose pin is %s, not the enrolled %s: if the BMC's certificate was replaced, check the new one and enroll the node with %s %s",
			host, pm.Got, pm.Want, bmc.FlagTLSPin, pm.Got)
	}
	msg := fmt.Sprintf("BMC %s presented a TLS certificate the site agent does not trust", host)
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) && len(ve.UnverifiedCertificates) > 0 {
		msg += fmt.Sprintf(" (public key pin %s)", bmc.SPKIPin(ve.UnverifiedCertificates[0]))
	}
	if d.tls.CAPEM != "" {
		return msg + fmt.Sprintf(": it does not chain to the CA given with %s, or does not name %s; give the CA that signed it", bmc.FlagCAFile, d.addr.Host)
	}
	return msg + fmt.Sprintf(": enroll it with %s (its CA certificate) or %s (its public key pin), or in a lab with %s", bmc.FlagCAFile, bmc.FlagTLSPin, bmc.FlagInsecure)
}

// httpMessage explains an HTTP error status of the BMC.
func httpMessage(host, user string, re *common.Error) string {
	status := re.HTTPReturnedStatusCode
	switch status {
	case http.StatusUnauthorized:
		return fmt.Sprintf("BMC %s answered HTTP 401 Unauthorized: check the BMC credentials (username %q and its password) enrolled for this machine; not retried, so the BMC account is not locked out", host, user)
	case http.StatusForbidden:
		return fmt.Sprintf("BMC %s answered HTTP 403 Forbidden: the BMC account %q lacks the privilege for this; give it operator or administrator rights", host, user)
	}
	detail := re.Message
	if len(re.ExtendedInfos) > 0 && re.ExtendedInfos[0].Message != "" {
		detail = re.ExtendedInfos[0].Message
	}
	detail = strings.TrimSpace(detail)
	if len(detail) > 300 {
		detail = detail[:300] + "…"
	}
	if detail == "" {
		return fmt.Sprintf("BMC %s answered HTTP %d %s", host, status, http.StatusText(status))
	}
	return fmt.Sprintf("BMC %s answered HTTP %d %s: %s", host, status, http.StatusText(status), detail)
}

// httpReason is what an HTTP error answer says of the BMC: busy for 503,
// 429 and a session limit (the DMTF registry's SessionLimitExceeded, under
// any status), unreachable for other server errors, "" for refusals.
func httpReason(re *common.Error) string {
	switch status := re.HTTPReturnedStatusCode; {
	case status == http.StatusServiceUnavailable, status == http.StatusTooManyRequests, sessionLimit(re):
		return bmc.ReasonBusy
	case status >= 500:
		return bmc.ReasonUnreachable
	}
	return ""
}

// sessionLimit reports whether the answer's message ids name the DMTF Base
// registry's SessionLimitExceeded (e.g. "Base.1.8.SessionLimitExceeded").
func sessionLimit(re *common.Error) bool {
	ids := []string{re.Code}
	for _, x := range re.ExtendedInfos {
		ids = append(ids, x.MessageID)
	}
	for _, id := range ids {
		if strings.HasPrefix(id, "Base.") && strings.HasSuffix(id, ".SessionLimitExceeded") {
			return true
		}
	}
	return false
}

// firstFailure unwraps gofish's CollectionError, which errors.As cannot see
// through, to the failure of the first link in order.
func firstFailure(err error) error {
	var ce *common.CollectionError
	if !errors.As(err, &ce) || len(ce.Failures) == 0 {
		return err
	}
	links := make([]string, 0, len(ce.Failures))
	for l := range ce.Failures {
		links = append(links, l)
	}
	sort.Strings(links)
	return ce.Failures[links[0]]
}

// statusOf returns the HTTP status of a Redfish error answer, 0 for others.
func statusOf(err error) int {
	var re *common.Error
	if errors.As(firstFailure(err), &re) {
		return re.HTTPReturnedStatusCode
	}
	return 0
}
