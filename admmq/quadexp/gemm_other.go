//go:build !(linux && (amd64 || arm64))

package quadexp

import "errors"

func openBLASDgemm() (func() gemmFunc, string, error) {
	return nil, "", errors.New("loading OpenBLAS without cgo is supported on linux/amd64 and linux/arm64 only")
}
