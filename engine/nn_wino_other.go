//go:build !amd64 || purego

package engine

// winoFast is false without the assembly: the Winograd path does not run.
func winoFast() bool { return false }

func winoIn(q []float32, qp, S, tw, rows int, v []float32, ldv int) {
	winoCheck(q, qp, S, tw, rows, v, ldv)
	winoInGo(q, qp, S, tw, rows, v, ldv)
}

func winoOut(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, bias float32, res []float32, flags int) {
	winoOutGo(m, ldm, tw, rows, y, ow, ohr, bias, res, flags)
}

func winoIn4(p []float32, pp, S, tw, rows int, v []float32, ldv int, _ *wino4Tabs) {
	wino4Check(p, pp, S, tw, rows, v, ldv)
	winoIn4Go(p, pp, S, tw, rows, v, ldv)
}

func winoOut4(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, bias float32, res []float32, flags int, _ *wino4Tabs) {
	wino4OutCheck(m, ldm, tw, rows, y, ow, ohr, res, flags)
	winoOut4Go(m, ldm, tw, rows, y, ow, ohr, bias, res, flags)
}

// wino4Fast is false without the assembly.
func wino4Fast() bool { return false }
