package site

import (
	"context"
	"errors"

	"github.com/better-compute/better-compute/bmc"
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

// answerOf classifies a driver's error by the reason the driver set on it
// (bmc.ReasonBusy, bmc.ReasonUnreachable), never by its message, so a
// reworded message cannot turn the breaker or the backoff off. An error
// without a reason, refusals included, proves the BMC answered.
func answerOf(err error) answer {
	switch {
	case err == nil:
		return answered
	case errors.Is(err, context.Canceled):
		return ownContext
	}
	switch errs.ReasonOf(err) {
	case bmc.ReasonBusy:
		return busy
	case bmc.ReasonUnreachable:
		return unreachable
	}
	return answered
}
