package api

// The event types of a log stream.
const (
	EventLog     = "log"
	EventWarning = "warning"
	EventState   = "state"
	EventEOF     = "eof"
)

// Warning says that frames after the cursor asked for were dropped by
// retention; the stream goes on from FirstAvailableCursor.
type Warning struct {
	Message              string `json:"message"`
	FirstAvailableCursor string `json:"firstAvailableCursor"`
}
