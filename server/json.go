package server

import (
	"encoding/json"
	"net/http"
)

// The encoding side of the API's JSON; decode.go holds the decoding side.

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
