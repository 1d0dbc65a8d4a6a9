package sdk

import (
	"strings"
	"testing"
)

func TestRenderTemplate(t *testing.T) {
	got, err := RenderTemplate("host {{ hostname }} token {{token}} {{hostname}}", map[string]string{"hostname": "n1", "token": "t"})
	if want := "host n1 token t n1"; err != nil || got != want {
		t.Errorf("RenderTemplate = %q, %v; want %q", got, err, want)
	}
	_, err = RenderTemplate("{{hostname}} {{tokn}} {{abc}}", map[string]string{"hostname": "n1"})
	if err == nil || !strings.Contains(err.Error(), "abc, tokn") {
		t.Errorf("RenderTemplate with missing names = %v, want an error naming abc, tokn", err)
	}
}
