package blas

import gblas "gonum.org/v1/gonum/blas"

// Panic messages of gonum's blas/gonum package. The overrides panic with the
// same strings so that code written against gonum sees the same contract
// whichever backend runs.
const (
	zeroIncX     = "blas: zero x index increment"
	zeroIncY     = "blas: zero y index increment"
	mLT0         = "blas: m < 0"
	nLT0         = "blas: n < 0"
	kLT0         = "blas: k < 0"
	badTranspose = "blas: illegal transpose"
	badLdA       = "blas: bad leading dimension of A"
	badLdB       = "blas: bad leading dimension of B"
	badLdC       = "blas: bad leading dimension of C"
	shortX       = "blas: insufficient length of x"
	shortY       = "blas: insufficient length of y"
	shortA       = "blas: insufficient length of a"
	shortB       = "blas: insufficient length of b"
	shortC       = "blas: insufficient length of c"
)

// isTrans reports whether t asks for the transpose; ConjTrans is the same as
// Trans for real matrices. It panics on any other value.
func isTrans(t gblas.Transpose) bool {
	switch t {
	case gblas.NoTrans:
		return false
	case gblas.Trans, gblas.ConjTrans:
		return true
	}
	panic(badTranspose)
}

// checkGemm validates Sgemm's arguments in gonum's order and reports whether
// there is any work to do (m and n both positive).
func checkGemm(tA, tB gblas.Transpose, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) (aTrans, bTrans, work bool) {
	aTrans = isTrans(tA)
	bTrans = isTrans(tB)
	switch {
	case m < 0:
		panic(mLT0)
	case n < 0:
		panic(nLT0)
	case k < 0:
		panic(kLT0)
	}
	if aTrans && lda < max(1, m) || !aTrans && lda < max(1, k) {
		panic(badLdA)
	}
	if bTrans && ldb < max(1, k) || !bTrans && ldb < max(1, n) {
		panic(badLdB)
	}
	if ldc < max(1, n) {
		panic(badLdC)
	}
	if m == 0 || n == 0 {
		return aTrans, bTrans, false
	}
	// With k == 0 these bounds are negative or small and hold trivially,
	// exactly as in gonum.
	if aTrans && len(a) < (k-1)*lda+m || !aTrans && len(a) < (m-1)*lda+k {
		panic(shortA)
	}
	if bTrans && len(b) < (n-1)*ldb+k || !bTrans && len(b) < (k-1)*ldb+n {
		panic(shortB)
	}
	if len(c) < (m-1)*ldc+n {
		panic(shortC)
	}
	return aTrans, bTrans, true
}

// checkGemv validates Sgemv's arguments in gonum's order and returns the
// lengths of x and y and whether there is any work to do.
func checkGemv(tA gblas.Transpose, m, n int, a []float32, lda int, x []float32, incX int, y []float32, incY int) (lenX, lenY int, work bool) {
	trans := isTrans(tA)
	switch {
	case m < 0:
		panic(mLT0)
	case n < 0:
		panic(nLT0)
	case lda < max(1, n):
		panic(badLdA)
	case incX == 0:
		panic(zeroIncX)
	case incY == 0:
		panic(zeroIncY)
	}
	lenX, lenY = n, m
	if trans {
		lenX, lenY = m, n
	}
	if m == 0 || n == 0 {
		return lenX, lenY, false
	}
	if !vecFits(lenX, x, incX) {
		panic(shortX)
	}
	if !vecFits(lenY, y, incY) {
		panic(shortY)
	}
	if len(a) < lda*(m-1)+n {
		panic(shortA)
	}
	return lenX, lenY, true
}

// vecFits reports whether a strided vector of n > 0 elements with increment
// inc fits in v. A negative increment walks v backwards from its end of the
// used range, as in the reference BLAS, so only |inc| matters.
func vecFits(n int, v []float32, inc int) bool {
	if inc < 0 {
		inc = -inc
	}
	return (n-1)*inc < len(v)
}

// checkAxpyDot validates the arguments shared by Saxpy and Sdot (incX, incY,
// n, then the lengths) and reports whether n > 0.
func checkAxpyDot(n int, x []float32, incX int, y []float32, incY int) bool {
	switch {
	case incX == 0:
		panic(zeroIncX)
	case incY == 0:
		panic(zeroIncY)
	case n < 0:
		panic(nLT0)
	case n == 0:
		return false
	}
	if !vecFits(n, x, incX) {
		panic(shortX)
	}
	if !vecFits(n, y, incY) {
		panic(shortY)
	}
	return true
}
