package bmc

// Reasons a driver sets on its DRIVER_ERROR (errs.Error.Reason, read with
// errs.ReasonOf) where it knows what the BMC's answer means, so the site's
// BMC gate backs off and keeps its breaker by them, never by message texts.
const (
	// ReasonBusy: the BMC is up but cannot serve now (HTTP 503 or 429, a
	// session limit, IPMI node busy or no free session); ask again shortly.
	ReasonBusy = "bmc-busy"
	// ReasonUnreachable: no answer (refused, timed out, connection closed)
	// or a server error; counts toward the breaker.
	ReasonUnreachable = "bmc-unreachable"
)
