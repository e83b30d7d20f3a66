package engine

import (
	"strings"
	"sync"
	"testing"

	"github.com/qtool/qtool/internal/fdcheck"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// fdSpec is how one finite-difference check perturbs and compares.
type fdSpec struct {
	// step returns the perturbation for an entry whose value is x.
	step       func(x float64) float64
	atol, rtol float64
}

// fixedStep perturbs every entry by h.
func fixedStep(h float64) func(float64) float64 { return func(float64) float64 { return h } }

// fdCheck is the engine's finite-difference check: fdcheck.Check, and when every entry
// agrees, ops (the op types whose gradients the check exercises) are recorded as
// FD-checked for TestOpCoverage.
func fdCheck[T float32 | float64](t testing.TB, what string, x []T, analytic func(j int) float64, loss func() float64, s fdSpec, ops ...string) {
	t.Helper()
	if fdcheck.Check(t, what, x, analytic, loss, fdcheck.Spec{Step: s.step, Atol: s.atol, Rtol: s.rtol}) && len(x) > 0 {
		opsCovered.add(t, opsCovered.fd, ops...)
	}
}

// opCoverage records, while the tests run, which op types passed a finite-difference
// check, a conformance node test or an onnxruntime comparison; TestOpCoverage walks the
// registry against it. It is the test binary's one piece of shared state: the checks
// record what they verified, so coverage cannot drift from a hand-kept list.
type opCoverage struct {
	mu            sync.Mutex
	fd, conf, ort map[string]bool
	ran           map[string]bool // top-level tests that recorded something
}

var opsCovered = &opCoverage{fd: map[string]bool{}, conf: map[string]bool{}, ort: map[string]bool{}, ran: map[string]bool{}}

func (c *opCoverage) add(t testing.TB, set map[string]bool, ops ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		set[op] = true
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	c.ran[top] = true
}

// recordPassed records the op types of m's nodes in set when t ends without failing.
func recordPassed(t testing.TB, set map[string]bool, m *onnxpb.ModelProto) {
	t.Cleanup(func() {
		if !t.Failed() && !t.Skipped() {
			for _, n := range m.GetGraph().GetNode() {
				key, _ := opKey(n.GetDomain(), n.GetOpType())
				opsCovered.add(t, set, key)
			}
		}
	})
}

func (c *opCoverage) has(set map[string]bool, op string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return set[op]
}

// none reports whether nothing was recorded in set.
func (c *opCoverage) none(set map[string]bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(set) == 0
}

func (c *opCoverage) hasRun(test string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ran[test]
}

// closeTo is fdcheck.Close, the comparison of the engine's numeric tests.
func closeTo(got, want, atol, rtol float64) bool { return fdcheck.Close(got, want, atol, rtol) }
