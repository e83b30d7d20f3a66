//go:build cgo

package cpuidmask

/*
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

// qtoolMaskState: 0 off (no variable), 1 on, -errno when arch_prctl refused.
static int qtoolMaskState;

// qtoolTraps counts the CPUID instructions emulated.
static unsigned long qtoolTraps;

// Leaf 7 sub-leaf 0: EBX AVX512F, DQ, IFMA, PF, ER, CD, BW, VL; ECX AVX512_VBMI,
// VBMI2, VNNI, BITALG, VPOPCNTDQ; EDX 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16,
// AVX512_FP16, AMX-TILE, AMX-INT8. Sub-leaf 1: EAX AVX-VNNI, AVX512_BF16, AMX-FP16;
// EDX AVX10.
#define QM_7_0_EBX ((1u<<16)|(1u<<17)|(1u<<21)|(1u<<26)|(1u<<27)|(1u<<28)|(1u<<30)|(1u<<31))
#define QM_7_0_ECX ((1u<<1)|(1u<<6)|(1u<<11)|(1u<<12)|(1u<<14))
#define QM_7_0_EDX ((1u<<2)|(1u<<3)|(1u<<8)|(1u<<22)|(1u<<23)|(1u<<24)|(1u<<25))
#define QM_7_1_EAX ((1u<<4)|(1u<<5)|(1u<<21))
#define QM_7_1_EDX (1u<<19)

static void qtoolHide(unsigned leaf, unsigned sub, unsigned *a, unsigned *b, unsigned *c, unsigned *d) {
	if (leaf == 7 && sub == 0) {
		*b &= ~QM_7_0_EBX;
		*c &= ~QM_7_0_ECX;
		*d &= ~QM_7_0_EDX;
	} else if (leaf == 7 && sub == 1) {
		*a &= ~QM_7_1_EAX;
		*d &= ~QM_7_1_EDX;
	}
}

static void qtoolFault(int sig, siginfo_t *si, void *ctx) {
	ucontext_t *uc = ctx;
	greg_t *r = uc->uc_mcontext.gregs;
	// A CPUID fault is a general-protection fault, delivered as SI_KERNEL; a bad
	// address is SEGV_MAPERR or SEGV_ACCERR, and its instruction may not be readable.
	if (si->si_code == SI_KERNEL) {
		const unsigned char *ip = (const unsigned char *)r[REG_RIP];
		if (ip[0] == 0x0f && ip[1] == 0xa2) {
			unsigned leaf = (unsigned)r[REG_RAX], sub = (unsigned)r[REG_RCX];
			unsigned a, b, c, d;
			syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
			__cpuid_count(leaf, sub, a, b, c, d);
			syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
			qtoolHide(leaf, sub, &a, &b, &c, &d);
			r[REG_RAX] = a;
			r[REG_RBX] = b;
			r[REG_RCX] = c;
			r[REG_RDX] = d;
			r[REG_RIP] += 2;
			__atomic_add_fetch(&qtoolTraps, 1, __ATOMIC_RELAXED);
			return;
		}
	}
	// Not a CPUID: die of it as the process would have.
	signal(sig, SIG_DFL);
}

__attribute__((constructor)) static void qtoolMaskInit(void) {
	const char *v = getenv("QTOOL_CPUID_MASK");
	if (v == NULL || strcmp(v, "avx2") != 0) {
		return;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = qtoolFault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
		qtoolMaskState = -errno;
		signal(SIGSEGV, SIG_DFL);
		return;
	}
	qtoolMaskState = 1;
}

static int qtoolMaskStateGet(void) { return qtoolMaskState; }
static unsigned long qtoolTrapsGet(void) { return __atomic_load_n(&qtoolTraps, __ATOMIC_RELAXED); }

// qtoolCPUID runs CPUID from C: under the mask it traps like any other.
static void qtoolCPUID(unsigned leaf, unsigned sub, unsigned *out) {
	__cpuid_count(leaf, sub, out[0], out[1], out[2], out[3]);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Hidden returns the bits the mask clears in leaf and sub-leaf, in EAX, EBX, ECX, EDX
// order; every other bit of every leaf is the CPU's.
func Hidden(leaf, sub uint32) [4]uint32 {
	switch {
	case leaf == 7 && sub == 0:
		return [4]uint32{0, C.QM_7_0_EBX, C.QM_7_0_ECX, C.QM_7_0_EDX}
	case leaf == 7 && sub == 1:
		return [4]uint32{C.QM_7_1_EAX, 0, 0, C.QM_7_1_EDX}
	}
	return [4]uint32{}
}

// ErrUnsupported is returned by Active when the variable asked for the mask and the
// kernel refused CPUID faulting (no CPU or hypervisor support).
var ErrUnsupported = errors.New("cpuidmask: CPUID faulting is not available here")

// Active reports whether this process runs under the mask. It fails when the
// variable asked for it and it could not be turned on.
func Active() (bool, error) {
	switch s := int(C.qtoolMaskStateGet()); {
	case s == 1:
		return true, nil
	case s < 0:
		return false, fmt.Errorf("%w (%s=%s: arch_prctl: %v)", ErrUnsupported, EnvVar, os.Getenv(EnvVar), syscall.Errno(-s))
	}
	if v := os.Getenv(EnvVar); v != "" && v != "avx2" {
		return false, fmt.Errorf("cpuidmask: %s=%q: the one value is avx2", EnvVar, v)
	}
	return false, nil
}

// CPUID returns EAX, EBX, ECX and EDX of leaf and sub-leaf as this process sees them.
func CPUID(leaf, sub uint32) [4]uint32 {
	var out [4]C.uint
	C.qtoolCPUID(C.uint(leaf), C.uint(sub), &out[0])
	return [4]uint32{uint32(out[0]), uint32(out[1]), uint32(out[2]), uint32(out[3])}
}

// Traps returns how many CPUID instructions the mask has answered in this process
// (the Go runtime's own detection among them): a library that consulted CPUID after
// the process started under the mask adds to it.
func Traps() uint64 { return uint64(C.qtoolTrapsGet()) }
