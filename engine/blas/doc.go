// Package blas chooses the BLAS implementation that carries qtool's matrix work.
//
// Every matrix product in qtool goes through gonum's blas.Float32 interface.
// The pure-Go gonum implementation (type Go, with two corrections described
// on the type) is always available and is the fallback.
// When the OpenBLAS shared library (Debian package libopenblas0) is installed,
// package blas loads it at run time with github.com/ebitengine/purego, so the
// qtool binary is still built with CGO_ENABLED=0 and needs no C toolchain.
// To load libraries, purego makes that binary dynamically linked against the
// system's libc and loader (ld-linux), though it embeds no C code; build with
// -tags noopenblas for a fully static binary that always uses pure Go.
//
// The OpenBLAS-backed value embeds Go and overrides only
// the routines that carry the work (Sgemm, Sgemv, Saxpy, Sdot, Sscal). Each
// override validates its arguments exactly as gonum does and panics with the
// same messages, so switching backends never changes which calls are legal.
// Both backends follow the reference BLAS where implementations differ: with
// beta == 0 the old contents of C or y are never read, so NaN garbage there
// does not propagate, and with alpha == 0 the operands A, B, x are not read.
//
// Select picks the implementation from a mode string; ModeFromEnv reads the
// mode from the QTOOL_BLAS environment variable (auto, go or openblas).
package blas
