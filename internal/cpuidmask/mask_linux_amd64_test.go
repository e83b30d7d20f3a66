//go:build cgo

package cpuidmask

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// leaves are the leaves and sub-leaves compared between a masked child and this
// process: the vendor, the feature leaves and an extended one.
var leaves = [][2]uint32{{0, 0}, {1, 0}, {7, 0}, {7, 1}, {0x80000001, 0}}

// report is what the child prints: every leaf as a goroutine on another thread saw it,
// and the counts of traps.
type report struct {
	Active   bool
	Err      string
	Leaves   map[string][4]uint32
	Threads  []string // the same leaves, seen from freshly started threads
	TrapsAft uint64
	Panicked bool // a nil dereference in Go code was recovered as a Go panic
}

func key(l [2]uint32) string { return fmt.Sprintf("%x.%d", l[0], l[1]) }

// TestMain runs the child's side when the test binary is started under the mask.
func TestMain(m *testing.M) {
	if os.Getenv("CPUIDMASK_CHILD") == "1" {
		child()
		return
	}
	os.Exit(m.Run())
}

func child() {
	var r report
	ok, err := Active()
	r.Active = ok
	if err != nil {
		r.Err = err.Error()
	}
	r.Leaves = map[string][4]uint32{}
	for _, l := range leaves {
		r.Leaves[key(l)] = CPUID(l[0], l[1])
	}
	// Threads started after the constructor inherit the fault: ask from goroutines
	// locked to new OS threads, several at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // and never unlock, so the thread is not reused
			v := CPUID(7, 0)
			mu.Lock()
			r.Threads = append(r.Threads, fmt.Sprintf("%08x", v))
			mu.Unlock()
		}()
	}
	wg.Wait()
	func() {
		defer func() { r.Panicked = recover() != nil }()
		var p *int
		_ = *p
	}()
	r.TrapsAft = Traps()
	json.NewEncoder(os.Stdout).Encode(r)
}

// stable clears what differs between the CPUs a thread may run on: leaf 1's EBX
// holds the initial APIC ID in its top byte.
func stable(l [2]uint32, v [4]uint32) [4]uint32 {
	if l == [2]uint32{1, 0} {
		v[1] &^= 0xff000000
	}
	return v
}

func runChild(t *testing.T, env string) report {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CPUIDMASK_CHILD=1", EnvVar+"="+env)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child with %s=%q: %v", EnvVar, env, err)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return r
}

// TestMask compares every leaf a masked child sees with what this process sees: the
// hidden bits cleared, every other bit the CPU's, on every thread; and a child without
// the variable sees the CPU as it is (the control).
func TestMask(t *testing.T) {
	if ok, err := Active(); ok || err != nil {
		t.Fatalf("the test process itself runs masked (%v, %v): unset %s", ok, err, EnvVar)
	}
	if Traps() != 0 {
		t.Fatalf("Traps() = %d without the mask", Traps())
	}
	plain := runChild(t, "")
	if plain.Active || plain.Err != "" || plain.TrapsAft != 0 {
		t.Fatalf("without the variable: active %v, err %q, traps %d", plain.Active, plain.Err, plain.TrapsAft)
	}
	for _, l := range leaves {
		if got, want := stable(l, plain.Leaves[key(l)]), stable(l, CPUID(l[0], l[1])); got != want {
			t.Errorf("unmasked child leaf %s = %08x, this process %08x", key(l), got, want)
		}
	}
	masked := runChild(t, "avx2")
	if masked.Err != "" && strings.Contains(masked.Err, "not available") {
		t.Skipf("CPUID faulting unavailable on this machine (%s): the mask cannot be tested here", masked.Err)
	}
	if !masked.Active || masked.Err != "" {
		t.Fatalf("under the mask: active %v, err %q", masked.Active, masked.Err)
	}
	if !masked.Panicked || !plain.Panicked {
		t.Errorf("a nil dereference in Go code did not recover as a panic (masked %v, plain %v)", masked.Panicked, plain.Panicked)
	}
	// The Go runtime's detection, the leaves asked for and the four threads.
	if min := uint64(len(leaves) + 4); masked.TrapsAft < min {
		t.Errorf("Traps() = %d under the mask, want at least %d", masked.TrapsAft, min)
	}
	for _, l := range leaves {
		cpu := stable(l, CPUID(l[0], l[1]))
		want := cpu
		hid := Hidden(l[0], l[1])
		for i := range want {
			want[i] &^= hid[i]
		}
		if got := stable(l, masked.Leaves[key(l)]); got != want {
			t.Errorf("masked leaf %s = %08x, want %08x (CPU %08x, hidden %08x)", key(l), got, want, cpu, hid)
		}
	}
	want7 := fmt.Sprintf("%08x", masked.Leaves[key([2]uint32{7, 0})])
	for i, s := range masked.Threads {
		if s != want7 {
			t.Errorf("thread %d saw leaf 7 = %s, the main thread %s", i, s, want7)
		}
	}
	// The control: on a CPU with AVX512F the mask must change what the child sees.
	if CPUID(7, 0)[1]&(1<<16) != 0 {
		if masked.Leaves[key([2]uint32{7, 0})][1]&(1<<16) != 0 {
			t.Errorf("AVX512F still visible under the mask")
		}
		if plain.Leaves[key([2]uint32{7, 0})][1]&(1<<16) == 0 {
			t.Errorf("AVX512F hidden without the mask")
		}
	} else {
		t.Logf("this CPU has no AVX512F: the mask's effect on it is not shown here")
	}
}

func TestBadValue(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CPUIDMASK_CHILD=1", EnvVar+"=avx512")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Active || !strings.Contains(r.Err, "the one value is avx2") {
		t.Errorf("%s=avx512: active %v, err %q", EnvVar, r.Active, r.Err)
	}
}
