#include "textflag.h"

// func sumAVX2(b []byte) uint64
//
// Adds the little-endian 16-bit words of b[:len(b)&^63] into 32-bit lanes (each word
// zero-extended, so nothing carries out of a lane for up to 2 MiB) and returns the lanes' total.
TEXT ·sumAVX2(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	SHRQ $6, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPCMPEQD Y7, Y7, Y7
	VPSRLD $16, Y7, Y7 // 0x0000ffff in every 32-bit lane
	TESTQ CX, CX
	JZ done

loop:
	VMOVDQU (SI), Y2
	VMOVDQU 32(SI), Y3
	VPAND Y7, Y2, Y4
	VPSRLD $16, Y2, Y2
	VPAND Y7, Y3, Y5
	VPSRLD $16, Y3, Y3
	VPADDD Y4, Y0, Y0
	VPADDD Y2, Y1, Y1
	VPADDD Y5, Y0, Y0
	VPADDD Y3, Y1, Y1
	ADDQ $64, SI
	DECQ CX
	JNZ loop

done:
	// Widen the 32-bit lanes of both accumulators to 64 bits and add them up.
	VPCMPEQD Y6, Y6, Y6
	VPSRLQ $32, Y6, Y6 // 0x00000000ffffffff in every 64-bit lane
	VPAND Y6, Y0, Y2
	VPSRLQ $32, Y0, Y0
	VPAND Y6, Y1, Y3
	VPSRLQ $32, Y1, Y1
	VPADDQ Y2, Y0, Y0
	VPADDQ Y3, Y1, Y1
	VPADDQ Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSRLDQ $8, X0, X1
	VPADDQ X1, X0, X0
	MOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
