package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A graph's kernels call Context.Parallel once or more per node, often on a few tens of
// microseconds of work: a small transformer at batch 32 runs 260 nodes in 2.5 ms. A
// goroutine started per call lands on an idle core only after the runtime wakes a
// sleeping thread, which took longer than 30 µs on this project's 2-core virtual
// machine; by then the caller had done its own half and the other half too, and the
// transformer, the OCR classifier and ResNet-18 at 32 px all ran faster on one thread
// than on two. workerPool keeps its goroutines spinning between the nodes of a run
// instead, for a bounded time, and the caller takes back any chunk that no worker has
// picked up once its own is done, so that a late worker costs nothing.

// poolSpin is how long an idle worker keeps polling for work before it parks: longer than
// the gap between two nodes of a run, short enough that a finished run does not hold a
// core.
const poolSpin = 200 * time.Microsecond

// workerPool is a Graph's set of persistent workers for Context.Parallel.
type workerPool struct {
	busy    atomic.Bool // a Parallel call owns the pool; nested and concurrent calls start goroutines instead
	closed  atomic.Bool
	workers []*poolWorker

	mu  sync.Mutex
	err *WorkerPanic // the current call's first panic
}

// poolChunk is one chunk of a Parallel call: [lo, hi) of fn; chunk 0 is the caller's.
// state goes from 0 (pending) to 1 (claimed by a worker or the caller) to 2 (done).
type poolChunk struct {
	fn     func(lo, hi int)
	lo, hi int
	state  atomic.Int32
	_      [40]byte // one cache line per chunk: workers write their states concurrently
}

type poolWorker struct {
	job    atomic.Pointer[poolChunk] // the chunk to run, nil when idle
	parked atomic.Bool
	wake   chan struct{} // capacity 1: a token that unparks
	_      [48]byte
}

// newWorkerPool starts n workers; closing the pool lets them exit.
func newWorkerPool(n int) *workerPool {
	p := &workerPool{}
	for range n {
		w := &poolWorker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.run(w)
	}
	return p
}

// close makes the workers exit; the pool must not be used afterwards.
func (p *workerPool) close() {
	p.closed.Store(true)
	for _, w := range p.workers {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (p *workerPool) run(w *poolWorker) {
	last := time.Now()
	for spins := 0; ; spins++ {
		if c := w.job.Swap(nil); c != nil {
			if c.state.CompareAndSwap(0, 1) {
				p.exec(c)
			}
			last, spins = time.Now(), 0
			continue
		}
		if p.closed.Load() {
			return
		}
		if spins%32 != 31 {
			continue
		}
		// Let other goroutines have this thread (with fewer threads than workers, the
		// caller itself may be waiting for it), and park once idle for long enough.
		runtime.Gosched()
		if time.Since(last) < poolSpin {
			continue
		}
		w.parked.Store(true)
		if w.job.Load() == nil && !p.closed.Load() {
			<-w.wake
		}
		w.parked.Store(false)
		last, spins = time.Now(), 0
	}
}

// exec runs chunk c and marks it done; a panic is kept for the caller.
func (p *workerPool) exec(c *poolChunk) {
	defer func() {
		if r := recover(); r != nil {
			wp := newWorkerPanic(r)
			p.mu.Lock()
			if p.err == nil {
				p.err = wp
			}
			p.mu.Unlock()
		}
		c.state.Store(2)
	}()
	c.fn(c.lo, c.hi)
}

// parallel runs fn over the w chunks of [0, n), each chunk long, on the workers and the
// calling goroutine. It reports false, having run nothing, when the pool is in use.
func (p *workerPool) parallel(n, w, chunk int, fn func(lo, hi int)) bool {
	if w-1 > len(p.workers) || !p.busy.CompareAndSwap(false, true) {
		return false
	}
	// Fresh chunks every call: a worker that took its job late holds a chunk of a
	// finished call, which is done, and does nothing with it.
	cs := make([]poolChunk, (n+chunk-1)/chunk)
	for i := range cs {
		cs[i].fn, cs[i].lo, cs[i].hi = fn, i*chunk, min((i+1)*chunk, n)
	}
	for i := 1; i < len(cs); i++ {
		wk := p.workers[i-1]
		wk.job.Store(&cs[i])
		if wk.parked.Load() {
			select {
			case wk.wake <- struct{}{}:
			default:
			}
		}
	}
	cs[0].state.Store(1)
	p.exec(&cs[0])
	// Chunks no worker has claimed yet are the caller's; then wait for the others.
	for i := 1; i < len(cs); i++ {
		if cs[i].state.CompareAndSwap(0, 1) {
			p.exec(&cs[i])
		}
	}
	for i := 1; i < len(cs); i++ {
		for spins := 0; cs[i].state.Load() != 2; spins++ {
			if spins%32 == 31 {
				runtime.Gosched()
			}
		}
	}
	err := p.err
	p.err = nil
	p.busy.Store(false)
	if err != nil {
		panic(err)
	}
	return true
}
