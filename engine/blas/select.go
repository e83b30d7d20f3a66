package blas

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	gblas "gonum.org/v1/gonum/blas"
)

// Modes accepted by Select.
const (
	// ModeAuto uses OpenBLAS when it can be loaded and pure Go otherwise.
	ModeAuto = "auto"
	// ModeGo always uses gonum's pure-Go implementation.
	ModeGo = "go"
	// ModeOpenBLAS requires OpenBLAS and fails when it cannot be loaded.
	ModeOpenBLAS = "openblas"
)

// EnvVar is the environment variable read by ModeFromEnv.
const EnvVar = "QTOOL_BLAS"

// Info describes the implementation that Select returned.
type Info struct {
	// Name is "go" or "openblas".
	Name string
	// Library is the shared library that was loaded; empty for "go".
	Library string
	// Config is OpenBLAS's own build description (openblas_get_config),
	// e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64";
	// empty for "go".
	Config string
	// Core is the kernel set OpenBLAS runs (openblas_get_corename), e.g. "Haswell";
	// empty for "go".
	Core string
	// CoreChoice is set when qtool chose that kernel set itself, because OpenBLAS
	// picked one without AVX2 on a CPU that has it: what was set and why.
	CoreChoice string
	// Threads is the number of threads one BLAS call may use. For "go" it is
	// the number of goroutines gonum's Sgemm may spread over (GOMAXPROCS at
	// the time of Select).
	Threads int
	// Fallback explains why ModeAuto fell back to pure Go; empty otherwise.
	Fallback string
}

// String gives a one-line description for `qtool version`.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Name)
	if i.Library != "" {
		fmt.Fprintf(&b, " (%s", i.Library)
		if i.Config != "" {
			fmt.Fprintf(&b, "; %s", i.Config)
		}
		if i.CoreChoice != "" {
			fmt.Fprintf(&b, "; %s", i.CoreChoice)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ", %d threads", i.Threads)
	if i.Fallback != "" {
		fmt.Fprintf(&b, "; openblas unavailable: %s", i.Fallback)
	}
	return b.String()
}

// ModeFromEnv returns the value of QTOOL_BLAS, or ModeAuto when it is unset or
// empty. The value is not validated here; Select does that.
func ModeFromEnv() string {
	if m := strings.TrimSpace(os.Getenv(EnvVar)); m != "" {
		return strings.ToLower(m)
	}
	return ModeAuto
}

// Select returns the BLAS implementation for mode (ModeAuto, ModeGo or
// ModeOpenBLAS; "" means ModeAuto) with OpenBLAS's default Options.
func Select(mode string) (gblas.Float32, Info, error) {
	return SelectWith(mode, Options{})
}

// SelectWith is Select with explicit options for loading OpenBLAS.
func SelectWith(mode string, opts Options) (gblas.Float32, Info, error) {
	switch mode {
	case ModeGo:
		return Go{}, goInfo(""), nil
	case ModeOpenBLAS:
		o, err := LoadOpenBLAS(opts)
		if err != nil {
			return nil, Info{}, fmt.Errorf("%s=%s: %w", EnvVar, mode, err)
		}
		return o, o.Info(), nil
	case ModeAuto, "":
		o, err := LoadOpenBLAS(opts)
		if err != nil {
			return Go{}, goInfo(err.Error()), nil
		}
		return o, o.Info(), nil
	default:
		return nil, Info{}, fmt.Errorf("%s=%q: unknown BLAS mode, want %s, %s or %s", EnvVar, mode, ModeAuto, ModeGo, ModeOpenBLAS)
	}
}

func goInfo(fallback string) Info {
	return Info{Name: ModeGo, Threads: runtime.GOMAXPROCS(0), Fallback: fallback}
}
