//go:build !amd64 || purego

package engine

// convTileOK is false without the assembly kernel: the portable convTileGeneric is no
// faster than the BLAS path, so convolutions keep using im2col and Sgemm.
func convTileOK() bool { return false }

func convTile(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int, offs *tileOffs, act *tileAct) {
	convTileGeneric(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs, act)
}

// dw3x3Fast is false without the assembly: depthwise planes take nnDW3x3.
func dw3x3Fast(wd int) bool { return false }

func dw3x3Plane(x, y []float32, h, wd int, w, bias []float32, act *nnClamp, add bool) bool {
	panic("dw3x3Plane without dw3x3Fast")
}

func dw3x3Planes(x, y []float32, h, wd, np int, w, bias []float32, act *nnClamp, add bool) bool {
	panic("dw3x3Planes without dw3x3Fast")
}

func dw3x3GradW(x, gy []float32, h, wd int, gw []float32) {
	panic("dw3x3GradW without dw3x3Fast")
}

// maxPool2x2Fast is false without the assembly.
func maxPool2x2Fast() bool { return false }

func maxPool2x2Plane(g *nnGeom, x, y []float32) { panic("maxPool2x2Plane without maxPool2x2Fast") }

// im2colS2Fast is false without the assembly.
func im2colS2Fast(g *nnGeom) bool { return false }

func im2colS2(p *s2Plan, x, col []float32) { panic("im2colS2 without im2colS2Fast") }

func maxPool2x2BackPlane(g *nnGeom, x, y, gy, gx []float32) {
	panic("maxPool2x2BackPlane without maxPool2x2Fast")
}

// transpose writes the transpose of the R × C matrix a into t (C × R).
func transpose(t, a []float32, R, C int) { transposeGo(t, a, R, C) }

// colTPlanFast is false without the assembly: colT2D builds colᵀ.
func colTPlanFast() bool { return false }

func colTPlan(p *cpPlan, xp, colT []float32) { panic("colTPlan without colTPlanFast") }

// convTileRows is convTile: the portable kernel makes whole blocks.
func convTileRows(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb, rows int, offs *tileOffs, act *tileAct) {
	convTileGeneric(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs, act)
}

// dwPlaneFast is false without the assembly: the generic depthwise loop is as fast as
// dwPlaneGo in Go.
func dwPlaneFast() bool { return false }

// dwSplit reports whether dwPlan splits stride-2 rows: not without the assembly.
func dwSplit() bool { return false }

func dwPlane(p *dwPlan, xp, y, w, bias []float32, act *nnClamp, stream bool, tmp []float32) {
	dwPlaneGo(p, xp, y, w, false)
	planeBiasAct(y[:p.g.outSize()], bias, act)
}

func dwPlaneAdd(p *dwPlan, xp, y, w []float32) { dwPlaneGo(p, xp, y, w, true) }

func dwGradW(p *dwPlan, xp, gy, gw []float32) { dwGradWGo(p, xp, gy, gw) }

// sigmoidFast is false without the assembly: sigmoidSlice takes the scalar sigmoid.
func sigmoidFast() bool { return false }

func sigmoidVec(x, y []float32) {
	for i, v := range x {
		y[i] = sigmoidF32(v)
	}
}

func siluVec(x, y []float32) {
	for i, v := range x {
		y[i] = siluF32(v)
	}
}

func expNegVec(x, y []float32) {
	for i, v := range x {
		y[i] = expNegF32(v)
	}
}

// nnSumsFast is false without the assembly: the Go loops of nn_norm.go run.
func nnSumsFast() bool { return false }

func nnSums(x, g []float32, n, segs, stride int, mu, inv float32, mode int) (float64, float64) {
	return nnSumsLanes(x, g, n, segs, stride, mu, inv, mode)
}

// gatherRow is gatherRowGo without the assembly.
func gatherRow(dst, src []float32, idx []int32, bound int) { gatherRowGo(dst, src, idx) }

// normRow is normRowGo without the assembly.
func normRow(x, y, s, b []float32, mu, inv float32) { normRowGo(x, y, s, b, mu, inv) }

// maxPoolRowsFast is false without the assembly: maxPoolRows runs in Go.
func maxPoolRowsFast(g *nnGeom, t *poolTables, x, y []float32, oa, ob, row0 int) bool {
	return false
}

// padRows is padRowsGo without the assembly.
func padRows(dst, src []float32, rows, w, pitch int) { padRowsGo(dst, src, rows, w, pitch) }

// s2Row is s2RowGo without the assembly.
func s2Row(dst, src []float32) { s2RowGo(dst, src) }

// s2Rows is s2Row on rows rows, ldd and lds values apart.
func s2Rows(dst []float32, ldd int, src []float32, lds, n, rows int) {
	for i := range rows {
		s2RowGo(dst[i*ldd:i*ldd+n], src[i*lds:i*lds+2*n-1])
	}
}

// siluRows is the SiLU of rows of n ≤ 16 values ldc apart, without the assembly.
func siluRows(c []float32, rows, ldc, n int) { siluRowsTo(c, ldc, c, ldc, rows, n, false) }

// siluRowsTo sets dst[r·ldc + j] = siluF32(src[r·lds + j]) for r < rows and j < n; the
// portable form ignores stream.
func siluRowsTo(dst []float32, ldc int, src []float32, lds, rows, n int, stream bool) {
	for r := range rows {
		siluVec(src[r*lds:r*lds+n], dst[r*ldc:r*ldc+n])
	}
}

// storeFence has nothing to order: the portable kernel stores as Go does.
func storeFence() {}

// dwBackS2 is dwBackS2Go without the assembly.
func dwBackS2(gx []float32, ldx int, gy []float32, ldy, n, rows int, w float32) {
	dwBackS2Go(gx, ldx, gy, ldy, n, rows, w)
}
