// Package ortref runs ONNX models in onnxruntime so that tests and benchmarks
// of other packages can compare qtool's engine against an independent
// implementation.
//
// It wraps github.com/yalue/onnxruntime_go, which needs cgo, so the package
// only builds with cgo (build constraint "cgo"): `CGO_ENABLED=0 go build ./...`
// and the static qtool binary never include it. Import it only from _test.go
// files and from programs under bench/.
//
// The onnxruntime shared library is not a Go dependency. It is found at the
// path in QTOOL_ORT_LIB, or else at .cache/onnxruntime/libonnxruntime.so.1
// under the module root (the nearest folder above the working directory that
// holds go.mod). Require skips a test when it is missing, or fails it when
// CI=true.
//
// onnxruntime's environment is process-wide: onnxruntime_go keeps it in
// package variables and refuses a second initialisation. This package
// therefore initialises it at most once per process behind a sync.Once; that
// guarded state is the one exception to qtool's rule against package-level
// state, forced by the library. The environment lives until the process ends.
package ortref
