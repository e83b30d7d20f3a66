//go:build linux && (amd64 || arm64) && !noopenblas

package blas

import (
	"fmt"
	"os"
	"strings"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/cpu"
)

// threadTimeoutEnv is read by OpenBLAS once, when the library loads. Its default lets
// idle worker threads spin for a long time after each call; on qtool's 2-core target
// they then steal the cores from the engine's own kernels that run between BLAS calls.
// Measured on fmnist-cnn and fmnist-resnet forward passes, a timeout of 4 (2^4 cycles
// of spinning before sleeping) cut CPU time per pass by 25-60 %.
const (
	threadTimeoutEnv     = "OPENBLAS_THREAD_TIMEOUT"
	defaultThreadTimeout = "4"
)

// coreTypeEnv chooses the kernels of an OpenBLAS built with DYNAMIC_ARCH (Debian's is),
// read once, when the library loads. Left unset, OpenBLAS picks them from the CPU model,
// and a build older than the CPU does not know the model and falls back to Prescott, its
// SSE3 kernels: Debian 12's OpenBLAS 0.3.21 does so on Intel Emerald Rapids (family 6,
// model 207), where the paper MLP's training step then took 1470 ms against 680 ms with
// the Haswell kernels and 500 ms with SkylakeX's (bench/train, 2026-11-28).
const coreTypeEnv = "OPENBLAS_CORETYPE"

// fallbackCore is the kernel set qtool asks for when OpenBLAS picked one without AVX2 on
// a CPU that has AVX2 and FMA. Haswell's kernels need nothing more, so they run on every
// such CPU, Intel's and AMD's alike; SkylakeX's are faster where AVX-512 is, but some hosts
// set OPENBLAS_CORETYPE=Haswell themselves because older builds computed wrong results or
// crashed on CPUs they did not know, and Haswell is the choice known to be safe there. A
// user's own value is never replaced.
const fallbackCore = "Haswell"

// preAVX2Core reports whether name, as openblas_get_corename gives it, is a kernel set
// that uses neither AVX2 nor FMA (the x86-64 targets of OpenBLAS's DYNAMIC_ARCH up to
// Sandy Bridge, and the generic fallbacks). Names not listed, including those of builds
// newer than this list, count as modern: qtool never replaces kernels it does not know
// to be weak.
func preAVX2Core(name string) bool {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "opteron",
		"opteron(sse3)", "barcelona", "nano", "sandybridge", "bobcat", "bulldozer",
		"piledriver", "steamroller", "katmai", "coppermine", "northwood", "banias",
		"athlon", "generic", "unknown":
		return true
	}
	return false
}

// setLibcEnv sets an environment variable in the C library's environment, which is
// where OpenBLAS reads it: without cgo, os.Setenv changes only Go's copy. A value the
// user already set is kept.
func setLibcEnv(name, value string) {
	if os.Getenv(name) != "" {
		return
	}
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return // not glibc: OpenBLAS keeps its default, which is correct, only slower
	}
	fn, err := purego.Dlsym(h, "setenv")
	if err != nil {
		return
	}
	var setenv func(name, value string, overwrite int32) int32
	purego.RegisterFunc(&setenv, fn)
	setenv(name, value, 0)
}

// openblasLib holds the entry points of one dlopen'ed OpenBLAS. CBLAS ints
// are C int (32 bits): Debian's libopenblas0 uses the LP64 interface, the
// 64-bit-index variant is a different package (libopenblas64-0) and soname.
type openblasLib struct {
	path   string
	handle uintptr
	config string
	// core is openblas_get_corename's answer: the kernel set in use.
	core string
	// chose is set when qtool chose the kernels (see coreTypeEnv): what it set and why.
	chose string

	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	sgemv func(order, trans, m, n int32, alpha float32, a *float32, lda int32, x *float32, incX int32, beta float32, y *float32, incY int32)
	saxpy func(n int32, alpha float32, x *float32, incX int32, y *float32, incY int32)
	sdot  func(n int32, x *float32, incX int32, y *float32, incY int32) float32
	sscal func(n int32, alpha float32, x *float32, incX int32)

	setNumThreads func(n int32)
	getNumThreads func() int32
}

// platformErr is nil: this build can load OpenBLAS.
func platformErr() error { return nil }

// openLib dlopens name and resolves every symbol qtool uses, so that a library missing
// one fails here rather than at the first call. When OpenBLAS picked kernels without AVX2
// on a CPU that has AVX2 and FMA, and the user did not choose them with
// OPENBLAS_CORETYPE, the library is closed and opened again with fallbackCore: OpenBLAS
// reads that variable only while it loads.
func openLib(name string) (*openblasLib, error) {
	setLibcEnv(threadTimeoutEnv, defaultThreadTimeout)
	l, err := dlopenLib(name)
	if err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv(coreTypeEnv); set || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || !preAVX2Core(l.core) {
		return l, nil
	}
	weak := l.core
	if err := purego.Dlclose(l.handle); err != nil {
		return l, nil // still loaded, as it was: correct, only slower
	}
	setLibcEnv(coreTypeEnv, fallbackCore)
	if l, err = dlopenLib(name); err != nil {
		return nil, err
	}
	if preAVX2Core(l.core) {
		// The C library kept the first copy (another reference held it), so the
		// variable came too late; say so rather than claim the choice.
		l.chose = fmt.Sprintf("%s=%s was not applied: the library stayed loaded with %s", coreTypeEnv, fallbackCore, l.core)
	} else {
		l.chose = fmt.Sprintf("%s=%s set by qtool: OpenBLAS picked %s, without AVX2, on this AVX2 CPU", coreTypeEnv, fallbackCore, weak)
	}
	return l, nil
}

// dlopenLib dlopens name and resolves its symbols.
func dlopenLib(name string) (*openblasLib, error) {
	h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("dlopen %s: %w", name, err)
	}
	l := &openblasLib{path: name, handle: h}
	syms := []struct {
		fptr any
		name string
	}{
		{&l.sgemm, "cblas_sgemm"},
		{&l.sgemv, "cblas_sgemv"},
		{&l.saxpy, "cblas_saxpy"},
		{&l.sdot, "cblas_sdot"},
		{&l.sscal, "cblas_sscal"},
		{&l.setNumThreads, "openblas_set_num_threads"},
		{&l.getNumThreads, "openblas_get_num_threads"},
	}
	for _, s := range syms {
		fn, err := purego.Dlsym(h, s.name)
		if err != nil {
			_ = purego.Dlclose(h)
			return nil, fmt.Errorf("%s: %s is missing (not an OpenBLAS library?): %w", name, s.name, err)
		}
		purego.RegisterFunc(s.fptr, fn)
	}
	// openblas_get_config and openblas_get_corename are informational only, so their
	// absence is not an error.
	for _, s := range []struct {
		dst  *string
		name string
	}{{&l.config, "openblas_get_config"}, {&l.core, "openblas_get_corename"}} {
		if fn, err := purego.Dlsym(h, s.name); err == nil {
			var get func() string
			purego.RegisterFunc(&get, fn)
			*s.dst = get()
		}
	}
	return l, nil
}
