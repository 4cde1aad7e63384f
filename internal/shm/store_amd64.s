//go:build amd64 && !race

#include "textflag.h"

// func StoreRelease(w *atomic.Uint64, v uint64)
TEXT ·StoreRelease(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ w+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
