//go:build linux && (amd64 || arm64) && !noopenblas

package blas

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

func TestPreAVX2Core(t *testing.T) {
	for _, name := range []string{"Prescott", "prescott", " Core2 ", "Nehalem", "Sandybridge", "Bulldozer", "Opteron(SSE3)", "Generic"} {
		if !preAVX2Core(name) {
			t.Errorf("preAVX2Core(%q) = false, want true", name)
		}
	}
	// Kernel sets with AVX2 and FMA, and names this list has never seen (a newer
	// build's), are kept.
	for _, name := range []string{"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator", "NeoverseN1", "Zen5", ""} {
		if preAVX2Core(name) {
			t.Errorf("preAVX2Core(%q) = true, want false", name)
		}
	}
}

// coreChildEnv makes the test binary, run again by TestOpenBLASCoreType, load OpenBLAS
// and print its Info as JSON: the kernel choice happens once per process, at load.
const coreChildEnv = "QTOOL_TEST_OPENBLAS_CORE_CHILD"

func TestOpenBLASCoreChild(t *testing.T) {
	if os.Getenv(coreChildEnv) == "" {
		t.Skip("run by TestOpenBLASCoreType")
	}
	o := requireOpenBLAS(t)
	// The reloaded library must still compute: a 2×2 product.
	a, b, c := []float32{1, 2, 3, 4}, []float32{5, 6, 7, 8}, make([]float32, 4)
	o.lib.sgemm(cblasRowMajor, cblasNoTrans, cblasNoTrans, 2, 2, 2, 1, &a[0], 2, &b[0], 2, 0, &c[0], 2)
	if !slices.Equal(c, []float32{19, 22, 43, 50}) {
		t.Fatalf("sgemm after loading = %v, want [19 22 43 50]", c)
	}
	out, _ := json.Marshal(o.Info())
	os.Stdout.Write(append([]byte("INFO "), append(out, '\n')...))
}

// loadInChild runs TestOpenBLASCoreChild in a new process with env (OPENBLAS_CORETYPE
// removed unless env sets it) and returns the Info it loaded.
func loadInChild(t *testing.T, env ...string) Info {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenBLASCoreChild$", "-test.v")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, coreTypeEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append(env, coreChildEnv+"=1")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "INFO "); ok {
			var info Info
			if err := json.Unmarshal([]byte(js), &info); err != nil {
				t.Fatal(err)
			}
			return info
		}
	}
	if strings.Contains(string(out), "SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
	t.Fatalf("child printed no Info:\n%s", out)
	return Info{}
}

// TestOpenBLASCoreType checks the kernels qtool ends up with: on a CPU with AVX2 and
// FMA, never a pre-AVX2 set when the user left OPENBLAS_CORETYPE unset (Debian 12's
// OpenBLAS picks Prescott on CPUs newer than it, such as Emerald Rapids), and always
// the user's own choice when set, Prescott included (the negative control: the
// loaded library does report a weak set when one runs).
func TestOpenBLASCoreType(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary twice")
	}
	if err := platformErr(); err != nil {
		t.Skip(err)
	}
	info := loadInChild(t)
	t.Logf("OPENBLAS_CORETYPE unset: core %q; %s", info.Core, info.CoreChoice)
	if info.Core == "" {
		t.Skip("this OpenBLAS has no openblas_get_corename")
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		if preAVX2Core(info.Core) {
			t.Errorf("OpenBLAS runs %s kernels on a CPU with AVX2 and FMA (%s)", info.Core, info.CoreChoice)
		}
		if info.CoreChoice != "" && info.Core != fallbackCore {
			t.Errorf("qtool chose the kernels (%s) but %s runs", info.CoreChoice, info.Core)
		}
	} else if info.CoreChoice != "" {
		t.Errorf("qtool chose kernels on a CPU without AVX2 and FMA: %s", info.CoreChoice)
	}
	if runtime.GOARCH != "amd64" {
		return
	}
	user := loadInChild(t, coreTypeEnv+"=Prescott")
	if !strings.EqualFold(user.Core, "Prescott") || user.CoreChoice != "" {
		t.Errorf("with OPENBLAS_CORETYPE=Prescott set by the user: core %q, qtool's choice %q; want Prescott and none", user.Core, user.CoreChoice)
	}
	if !preAVX2Core(user.Core) {
		t.Errorf("the user's Prescott kernels (%q) do not count as pre-AVX2", user.Core)
	}
}
