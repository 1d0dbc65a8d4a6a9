package agent

import (
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestStatusError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		body string
		want errs.Kind
	}{
		{501, `{"kind":"UNSUPPORTED","error":"this relay does not proxy joins"}`, errs.Unsupported},
		{502, `{"kind":"DRIVER_ERROR","error":"the control plane refused"}`, errs.DriverError},
		{503, `{"kind":"UNAVAILABLE","error":"later"}`, errs.Unavailable},
		{503, `not json`, errs.Unavailable},
		{404, ``, errs.NotFound},
		{401, `{}`, errs.Unauthenticated},
	} {
		err := statusError("POST", "/v1/join", tc.code, []byte(tc.body))
		if got := errs.KindOf(err); got != tc.want {
			t.Errorf("statusError(%d, %s) = %v (%s), want %s", tc.code, tc.body, err, got, tc.want)
		}
	}
	if retryable(statusError("POST", "/v1/join", 501, []byte(`{"kind":"UNSUPPORTED","error":"x"}`))) {
		t.Errorf("an UNSUPPORTED answer is retried; it can never succeed")
	}
}
