package sdk

import (
	"encoding/json"
	"log/slog"
)

// redacted is what a Secret prints, logs and encodes as.
const redacted = "(redacted)"

// LogValue keeps slog's handlers (JSON too) from writing the secret.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes a Secret redacted: one returned in a step's outputs
// by mistake reaches Temporal's history, the command log or a JSON log as
// "(redacted)", never in clear.
func (Secret) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }
