// Package cpuidmask makes a process see a CPU without AVX-512, so that a benchmark
// can hold a third-party library that picks its kernels from CPUID (onnxruntime's
// MLAS has no switch for it) to the kernels it runs on an AVX2 machine.
//
// A process that links this package and starts with QTOOL_CPUID_MASK=avx2 in its
// environment turns on CPUID faulting (arch_prctl ARCH_SET_CPUID, Linux on x86-64,
// where the CPU or hypervisor offers it) in a C constructor, before the Go runtime
// starts and before any other thread exists, so that every thread of the process
// inherits it. Each CPUID instruction then traps, and the handler runs the real
// instruction with the fault briefly off and hides the AVX-512, AMX, AVX-VNNI and
// AVX10 bits of leaf 7 before returning the registers. The Go runtime's own feature
// detection runs under the mask too (so the engine's assembly takes its AVX2 path);
// golang.org/x/sys/cpu, whose detection runs after the Go runtime has taken over
// SIGSEGV, must not be linked into such a process: its CPUID would fault in Go code,
// which the runtime does not forward.
//
// Without the variable the constructor does nothing. The package builds only with
// cgo on linux/amd64; import it from benchmark programs, never from qtool itself.
package cpuidmask

// EnvVar is the environment variable that turns the mask on; its one value is
// "avx2".
const EnvVar = "QTOOL_CPUID_MASK"
