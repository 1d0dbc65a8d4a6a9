package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// fail turns an error from go-ipmi or the network into an errs.Error that
// names the BMC and says what to do. Our own errors pass through.
func (d *Driver) fail(op string, err error) error {
	if own, ok := errs.Own(err, op); ok {
		return own
	}
	e := classify(d.host(), d.creds.Username, flat{err})
	e.Op = op
	d.log.Warn("ipmi operation failed", "op", op, "err", e.Error())
	return e
}

// classify explains err, an error of an exchange with the BMC at host.
func classify(host, user string, err error) *errs.Error {
	var rs *types.RmcpStatusError
	var cc *types.ResponseError
	var ne net.Error
	switch {
	case errors.Is(err, client.ErrRAKPAuthentication) || loginFailed(err, client.ErrRAKPAuthentication):
		return unauthenticated(host, user, "the password does not match", err)
	case errors.As(err, &rs):
		return rmcpStatus(host, user, rs, err)
	case sessionStatus(err, &rs):
		return rmcpStatus(host, user, rs, err)
	case errors.As(err, &cc) && cc.CompletionCode() == types.CodeInsufficientPrivilege:
		return errs.Wrap(errs.PermissionDenied, err, "BMC %s answered that %q lacks the privilege for this: give the account administrator rights on the BMC", host, user)
	case errors.As(err, &cc):
		e := errs.Wrap(errs.DriverError, err, "BMC %s answered completion code %s", host, ccName(cc.CompletionCode()))
		if busyCodes[cc.CompletionCode()] {
			e.Reason = bmc.ReasonBusy
		}
		return e
	case errors.Is(err, context.Canceled):
		return errs.Wrap(errs.DriverError, err, "the request to BMC %s was canceled", host)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return noAnswer(host, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &ne):
		return errs.Wrap(errs.DriverError, err, "cannot reach BMC %s: nothing answers IPMI there; check its address and that IPMI over LAN is enabled", host).
			WithReason(bmc.ReasonUnreachable)
	case strings.Contains(err.Error(), exchangeFailed):
		return noAnswer(host, err)
	}
	return errs.Wrap(errs.DriverError, err, "BMC %s answered something the IPMI driver cannot use", host)
}

// noAnswer is the error of an exchange the BMC did not answer in time.
func noAnswer(host string, err error) *errs.Error {
	return errs.Wrap(errs.DriverError, err, "BMC %s did not answer in time: check that it is up, reachable from the site agent over UDP, and has IPMI over LAN enabled", host).
		WithReason(bmc.ReasonUnreachable)
}

// busyCodes are the completion codes of a BMC that cannot serve the command
// now but may in a moment.
var busyCodes = map[types.CompletionCode]bool{
	types.CodeNodeBusy: true, types.CodeProcessTimeout: true, types.CodeCannotProvideResponse: true,
	types.CodeCannotProvideResponseSDRRInUpdate: true, types.CodeCannotProvideResponseBMCInitialize: true,
}

// rmcpStatus explains a status code of RMCP+ session setup.
func rmcpStatus(host, user string, rs *types.RmcpStatusError, err error) *errs.Error {
	switch rs.StatusCode() {
	case types.RmcpStatusCodeUnauthorizedName, types.RmcpStatusCodeInvalidNameLength:
		return unauthenticated(host, user, "the BMC knows no such user", err)
	case types.RmcpStatusCodeInvalidIntegrityCheckValue:
		return unauthenticated(host, user, "the BMC says the password does not match", err)
	case types.RmcpStatusCodeInvalidRole, types.RmcpStatusCodeUnauthorizedRoleOfPriLevel:
		return errs.Wrap(errs.PermissionDenied, err, "BMC %s refused administrator privilege to %q: give the account administrator rights on the BMC", host, user)
	case types.RmcpStatusCodeNoCipherSuiteMatch, types.RmcpStatusCodeInvalidAuthAlg,
		types.RmcpStatusCodeInvalidIntegrityAlg, types.RmcpStatusCodeInvalidConfidentAlg:
		return errs.Wrap(errs.Unsupported, err, "BMC %s does not offer the cipher suite the driver asked for: enable cipher suite 3 on the BMC or configure the one it offers", host)
	case types.RmcpStatusCodeNoResToCreateSess, types.RmcpStatusCodeNoResToCreateSessAtRole:
		return errs.Wrap(errs.DriverError, err, "BMC %s has no free session: wait for other clients to log out, then retry", host).
			WithReason(bmc.ReasonBusy)
	}
	return errs.Wrap(errs.DriverError, err, "BMC %s refused the session", host)
}

// unauthenticated is the final error of a refused login: an activity does
// not retry it, so a wrong password cannot lock the BMC account.
func unauthenticated(host, user, why string, err error) *errs.Error {
	return errs.Wrap(errs.Unauthenticated, err, "BMC %s refused the login of %q (%s): check the BMC credentials enrolled for this machine; not retried, so the BMC account is not locked out", host, user, why)
}

// completionCode returns the IPMI completion code of a refused command, and
// false for any other error.
func completionCode(err error) (types.CompletionCode, bool) {
	var cc *types.ResponseError
	if errors.As(err, &cc) {
		return cc.CompletionCode(), true
	}
	return 0, false
}

// ccName is a completion code as messages show it.
func ccName(c types.CompletionCode) string { return fmt.Sprintf("%#02x (%s)", uint8(c), c) }

// flat is a go-ipmi error on one line (it joins the failures of each
// cipher suite it tried with newlines), so errors and lastError stay one.
type flat struct{ err error }

func (f flat) Error() string { return strings.Join(strings.Fields(f.err.Error()), " ") }
func (f flat) Unwrap() error { return f.err }

// go-ipmi v0.9.1's Connect joins the failure of each cipher suite it tried
// with %v, which breaks the error chain, and an exchange that got no
// answer wraps an unexported error: these are found by go-ipmi's own texts
// (TestClassifyGoIPMIErrors pins them).
const exchangeFailed = "IPMI LAN: " // every exchange failure of go-ipmi's lan interface

// loginFailed reports whether err's text holds target's.
func loginFailed(err, target error) bool { return strings.Contains(err.Error(), target.Error()) }

// sessionStatus finds an RMCP+ status of session setup in err's text and
// sets *rs to it.
func sessionStatus(err error, rs **types.RmcpStatusError) bool {
	msg := err.Error()
	for code := types.RmcpStatusCode(1); code <= types.RmcpStatusCodeIllegalParameter; code++ {
		if found := types.NewRmcpStatusError(code); strings.Contains(msg, found.Error()) {
			*rs = found
			return true
		}
	}
	return false
}
