package errs

// FromCode is the kind of an error that carries only a Connect/gRPC code
// (its lower-snake name, as in a Connect JSON error: "not_found"): Connect's
// own errors (a body that does not decode, an oversized one, an unknown
// procedure) and answers from peers that attach no kind. The API maps kinds
// to codes in api/errors.go; this is the one way back.
func FromCode(code string) Kind {
	switch code {
	case "not_found":
		return NotFound
	case "invalid_argument", "out_of_range", "resource_exhausted":
		return InvalidInput
	case "failed_precondition", "aborted":
		return InvalidState
	case "unimplemented":
		return Unsupported
	case "unauthenticated":
		return Unauthenticated
	case "permission_denied":
		return PermissionDenied
	case "already_exists":
		return AlreadyExists
	case "unavailable", "deadline_exceeded", "canceled":
		return Unavailable
	}
	return Internal
}
