package site

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/errs"
)

// answer is what a call's error says of the BMC, for the gate.
type answer int

const (
	answered    answer = iota // it answered (success, or a refusal: it is up)
	busy                      // it is up but busy or out of sessions: try again shortly
	unreachable               // no answer, a timeout, or a server error: counts toward the breaker
	ownContext                // our own call was canceled: says nothing of the BMC
)

// answerOf classifies a driver's error; it is the one place that knows how
// each driver surfaces busy and transport failures (bmc/ipmi/errors.go,
// bmc/redfish/errors.go). Refusals that are final (UNAUTHENTICATED,
// PERMISSION_DENIED, UNSUPPORTED, INVALID_INPUT) prove the BMC answered.
func answerOf(err error) answer {
	switch {
	case err == nil:
		return answered
	case errors.Is(err, context.Canceled):
		return ownContext
	case isBusy(err):
		return busy
	case errs.KindOf(err) != errs.DriverError && errs.KindOf(err) != errs.Unavailable:
		return answered
	case isTransport(err):
		return unreachable
	}
	return answered
}

// busyCodes are the IPMI completion codes of a BMC that cannot serve the
// command now but may in a moment.
var busyCodes = map[types.CompletionCode]bool{
	types.CodeNodeBusy: true, types.CodeProcessTimeout: true, types.CodeCannotProvideResponse: true,
	types.CodeCannotProvideResponseSDRRInUpdate: true, types.CodeCannotProvideResponseBMCInitialize: true,
}

// busyTexts are answers of BMCs out of sessions: the IPMI driver's own
// (RMCP+ status 01h/0Bh), go-ipmi's, and what Redfish BMCs put in a 503's
// message.
var busyTexts = []string{
	"has no free session", "session limit", "too many sessions", "maximum number of sessions",
	"no more sessions", "out of sessions",
	types.NewRmcpStatusError(types.RmcpStatusCodeNoResToCreateSess).Error(),
	types.NewRmcpStatusError(types.RmcpStatusCodeNoResToCreateSessAtRole).Error(),
}

// httpStatus finds the HTTP status the Redfish driver quotes ("answered
// HTTP 503 …"): its errors carry no cause for an HTTP answer.
var httpStatus = regexp.MustCompile(`answered HTTP (\d{3})`)

func statusIn(err error) int {
	m := httpStatus.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func isBusy(err error) bool {
	var cc *types.ResponseError
	if errors.As(err, &cc) && busyCodes[cc.CompletionCode()] {
		return true
	}
	if s := statusIn(err); s == 503 || s == 429 {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, t := range busyTexts {
		if strings.Contains(msg, strings.ToLower(t)) {
			return true
		}
	}
	return false
}

// isTransport reports a failure to get an answer at all, or a server error.
func isTransport(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &ne):
		return true
	case statusIn(err) >= 500:
		return true
	}
	// Texts of the drivers' own messages and of go-ipmi's exchange
	// failures, which wrap an unexported error.
	msg := err.Error()
	for _, t := range []string{"did not answer in time", "cannot reach BMC", "IPMI LAN: "} {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}
