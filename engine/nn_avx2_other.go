//go:build !amd64 || purego

package engine

// convDirectOK is convTileOK without the assembly: the portable tile kernel is no
// faster than im2col and Sgemm.
func convDirectOK() bool { return convTileOK() }

// dwLanesFast is false without the assembly.
func dwLanesFast() bool { return false }

// dwLanesRun is dwLanesGo without the assembly.
func dwLanesRun(l *dwLanes, p, y []float32, ldy int, w, bias []float32, t tileAct) {
	dwLanesGo(l, p, y, ldy, w, bias, t)
}

func transpose8AVX2(t, a *float32, chunks, lda, ldt int) {
	panic("transpose8AVX2 without the assembly")
}
