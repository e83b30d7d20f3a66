// Macros shared by the amd64 kernels.

// PREFETCHW (R14), which the Go assembler does not spell: the cache line for writing, so
// that the store after it finds the line owned (a NOP where the CPU lacks it). PFWROWS4
// does so for four rows R11 bytes apart from R14, leaving R14 on the last.
#define PREFETCHW_R14 BYTE $0x41; BYTE $0x0f; BYTE $0x0d; BYTE $0x0e
#define PFWROWS4 \
	PREFETCHW_R14 ; \
	ADDQ R11, R14 ; \
	PREFETCHW_R14 ; \
	ADDQ R11, R14 ; \
	PREFETCHW_R14 ; \
	ADDQ R11, R14 ; \
	PREFETCHW_R14
