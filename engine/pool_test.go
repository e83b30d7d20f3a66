package engine

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPoolParallel checks Context.Parallel on a graph's worker pool against the
// goroutine-per-chunk path: the same chunks, every index once, over many calls in a
// row (workers busy, spinning, or parked in between), with a nested Parallel inside a
// chunk (which must not wait for the pool it runs on) and more workers than threads.
func TestPoolParallel(t *testing.T) {
	chunks := func(ctx *Context, n, grain int) [][2]int {
		var mu sync.Mutex
		var got [][2]int
		seen := make([]int, n)
		ctx.Parallel(n, grain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i]++
			}
			mu.Lock()
			got = append(got, [2]int{lo, hi})
			mu.Unlock()
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d grain=%d: index %d ran %d times", n, grain, i, c)
			}
		}
		slices.SortFunc(got, func(a, b [2]int) int { return a[0] - b[0] })
		return got
	}
	for _, workers := range []int{2, 3, 5} {
		pool := newWorkerPool(workers - 1)
		plain, pooled := &Context{Workers: workers}, &Context{Workers: workers, pool: pool}
		for call := range 3000 {
			n, grain := 1+call%97, 1+call%5
			if want, got := chunks(plain, n, grain), chunks(pooled, n, grain); !slices.Equal(got, want) {
				t.Fatalf("%d workers, n=%d grain=%d: chunks %v, want %v", workers, n, grain, got, want)
			}
			if call%500 == 0 {
				time.Sleep(2 * poolSpin) // let the workers park
			}
		}
		var inner [40]int
		pooled.Parallel(4, 1, func(lo, hi int) {
			for o := lo; o < hi; o++ {
				pooled.Parallel(10, 1, func(l, h int) {
					for i := l; i < h; i++ {
						inner[o*10+i]++
					}
				})
			}
		})
		for i, c := range inner {
			if c != 1 {
				t.Fatalf("%d workers, nested Parallel: index %d ran %d times", workers, i, c)
			}
		}
		pool.close()
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	pool := newWorkerPool(3)
	defer pool.close()
	ctx := &Context{Workers: 4, pool: pool}
	for range 200 {
		chunks(ctx, 64, 1)
	}
}

// TestPoolClose checks that a closed pool's workers exit, spinning or parked, so that a
// collected graph leaves no goroutine behind.
func TestPoolClose(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, park := range []bool{false, true} {
		pool := newWorkerPool(4)
		(&Context{Workers: 5, pool: pool}).Parallel(5, 1, func(lo, hi int) {})
		if park {
			time.Sleep(3 * poolSpin)
		}
		pool.close()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				t.Fatalf("park=%v: %d goroutines a closed pool's workers left, %d before", park, runtime.NumGoroutine(), base)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
