package sdk

import (
	"encoding/json"
	"fmt"
	"io"
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

// Format prints a Secret redacted whatever the verb: fmt prints the operand
// of a verb a string does not take (%d, %t…) without String, in clear.
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }
