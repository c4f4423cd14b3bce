package api

// Code is an API error code.
type Code string

// The API's error codes.
const (
	CodeInvalidArgument      Code = "invalid_argument"
	CodeUnauthenticated      Code = "unauthenticated"
	CodePermissionDenied     Code = "permission_denied"
	CodeNotFound             Code = "not_found"
	CodeUnsupportedOperation Code = "unsupported_operation"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodeResourceExhausted    Code = "resource_exhausted"
	CodeInternal             Code = "internal"
	// CodeDraining refuses new work while the daemon drains before it
	// stops (503, with Retry-After): work already started goes on.
	CodeDraining Code = "draining"
	// CodeStdinFull refuses a stdin write that does not fit in the
	// process's input queue; the error's acceptedBytes says how much of it
	// was queued.
	CodeStdinFull Code = "stdin_full"
	// CodeAlreadyExists refuses a session created with uniqueName whose
	// name a running session has: the error's sessionId names that one.
	CodeAlreadyExists Code = "already_exists"
)
