package testenv

import (
	"testing"
)

// recorder captures how a helper ended a test without ending this one.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()             {}
func (r *recorder) Skip(...any)         { r.skipped = true }
func (r *recorder) Fatal(...any)        { r.failed = true }
func (r *recorder) Logf(string, ...any) {}

func TestMissingSkipsOrFails(t *testing.T) {
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	RequireFile(r, "/nonexistent/asset", "apt-get install nothing")
	if !r.skipped || r.failed {
		t.Errorf("outside CI: skipped %v, failed %v; want a skip", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	RequireFile(r, "/nonexistent/asset", "apt-get install nothing")
	if !r.failed || r.skipped {
		t.Errorf("under CI: skipped %v, failed %v; want a failure", r.skipped, r.failed)
	}
	r = &recorder{TB: t}
	RequireFile(r, "testenv.go", "")
	if r.failed || r.skipped {
		t.Error("an existing file was reported missing")
	}
}
