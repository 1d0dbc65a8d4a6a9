// Package broken is the input of internal/gotest's golden test: a test that
// does not compile, whose compiler errors must show.
package broken

import "testing"

func TestBroken(t *testing.T) { var n int = "not a number"; _ = n }
