//go:build !purego

// md5Block: the MD5 compression function of RFC 1321 (section 3.4) applied
// to one 64-byte block, for amd64. It adds the block's digest into state in
// place, as one pass of crypto/md5's block function would.
//
// Registers: AX, BX, CX, DX hold the state words A, B, C, D; SI points at
// the block and DI at the state; R8 holds the next message word, loaded one
// step early; R9 and R10 hold the auxiliary function's running values.
//
// Each step is a = b + ((a + f(b, c, d) + X[k] + T[i]) <<< s), and takes as
// long as the chain of operations from b, the word the step before wrote,
// to a; everything else is done off that chain. The macros' index is the
// word the following step adds, and each step leaves in R9 (and R10) what
// the next step's function starts from:
//
//	F(b, c, d) = ((c ^ d) & b) ^ d         R9 = d
//	G(b, c, d) = (d & b) + (^d & c)        R9 = R10 = d
//	H(b, c, d) = b ^ c ^ d                 R9 = the step before's H
//	I(b, c, d) = c ^ (b | ^d)              R9 = ^d
//
// G is (d & b) | (^d & c) with the OR as an ADD (the two terms share no
// bit), so that ^d & c, which does not wait for b, is added to a first. H
// is the step before's H (its b ^ c ^ d: this step's c ^ d ^ a, a not yet
// written) with a and then b XORed in.

#include "textflag.h"

#define ROUND1(a, b, c, d, index, const, shift) \
	XORL	c, R9; \
	ADDL	$const, a; \
	ADDL	R8, a; \
	ANDL	b, R9; \
	XORL	d, R9; \
	MOVL	(index*4)(SI), R8; \
	ADDL	R9, a; \
	ROLL	$shift, a; \
	MOVL	c, R9; \
	ADDL	b, a

#define ROUND2(a, b, c, d, index, const, shift) \
	NOTL	R9; \
	ADDL	$const, a; \
	ADDL	R8, a; \
	ANDL	b, R10; \
	ANDL	c, R9; \
	MOVL	(index*4)(SI), R8; \
	ADDL	R9, a; \
	ADDL	R10, a; \
	MOVL	c, R9; \
	MOVL	c, R10; \
	ROLL	$shift, a; \
	ADDL	b, a

#define ROUND3(a, b, c, d, index, const, shift) \
	XORL	a, R9; \
	ADDL	$const, a; \
	ADDL	R8, a; \
	XORL	b, R9; \
	MOVL	(index*4)(SI), R8; \
	ADDL	R9, a; \
	ROLL	$shift, a; \
	ADDL	b, a

#define ROUND4(a, b, c, d, index, const, shift) \
	ORL	b, R9; \
	ADDL	$const, a; \
	ADDL	R8, a; \
	XORL	c, R9; \
	MOVL	(index*4)(SI), R8; \
	ADDL	R9, a; \
	ROLL	$shift, a; \
	MOVL	c, R9; \
	NOTL	R9; \
	ADDL	b, a

// func md5Block(state *[4]uint32, block *[64]byte)
TEXT ·md5Block(SB), NOSPLIT, $0-16
	MOVQ	state+0(FP), DI
	MOVQ	block+8(FP), SI

	MOVL	(0*4)(DI), AX
	MOVL	(1*4)(DI), BX
	MOVL	(2*4)(DI), CX
	MOVL	(3*4)(DI), DX

	MOVL	(0*4)(SI), R8
	MOVL	DX, R9
	ROUND1(AX, BX, CX, DX,  1, 0xd76aa478,  7)
	ROUND1(DX, AX, BX, CX,  2, 0xe8c7b756, 12)
	ROUND1(CX, DX, AX, BX,  3, 0x242070db, 17)
	ROUND1(BX, CX, DX, AX,  4, 0xc1bdceee, 22)
	ROUND1(AX, BX, CX, DX,  5, 0xf57c0faf,  7)
	ROUND1(DX, AX, BX, CX,  6, 0x4787c62a, 12)
	ROUND1(CX, DX, AX, BX,  7, 0xa8304613, 17)
	ROUND1(BX, CX, DX, AX,  8, 0xfd469501, 22)
	ROUND1(AX, BX, CX, DX,  9, 0x698098d8,  7)
	ROUND1(DX, AX, BX, CX, 10, 0x8b44f7af, 12)
	ROUND1(CX, DX, AX, BX, 11, 0xffff5bb1, 17)
	ROUND1(BX, CX, DX, AX, 12, 0x895cd7be, 22)
	ROUND1(AX, BX, CX, DX, 13, 0x6b901122,  7)
	ROUND1(DX, AX, BX, CX, 14, 0xfd987193, 12)
	ROUND1(CX, DX, AX, BX, 15, 0xa679438e, 17)
	ROUND1(BX, CX, DX, AX,  1, 0x49b40821, 22)

	MOVL	DX, R9
	MOVL	DX, R10
	ROUND2(AX, BX, CX, DX,  6, 0xf61e2562,  5)
	ROUND2(DX, AX, BX, CX, 11, 0xc040b340,  9)
	ROUND2(CX, DX, AX, BX,  0, 0x265e5a51, 14)
	ROUND2(BX, CX, DX, AX,  5, 0xe9b6c7aa, 20)
	ROUND2(AX, BX, CX, DX, 10, 0xd62f105d,  5)
	ROUND2(DX, AX, BX, CX, 15, 0x02441453,  9)
	ROUND2(CX, DX, AX, BX,  4, 0xd8a1e681, 14)
	ROUND2(BX, CX, DX, AX,  9, 0xe7d3fbc8, 20)
	ROUND2(AX, BX, CX, DX, 14, 0x21e1cde6,  5)
	ROUND2(DX, AX, BX, CX,  3, 0xc33707d6,  9)
	ROUND2(CX, DX, AX, BX,  8, 0xf4d50d87, 14)
	ROUND2(BX, CX, DX, AX, 13, 0x455a14ed, 20)
	ROUND2(AX, BX, CX, DX,  2, 0xa9e3e905,  5)
	ROUND2(DX, AX, BX, CX,  7, 0xfcefa3f8,  9)
	ROUND2(CX, DX, AX, BX, 12, 0x676f02d9, 14)
	ROUND2(BX, CX, DX, AX,  5, 0x8d2a4c8a, 20)

	MOVL	AX, R9
	XORL	CX, R9
	XORL	DX, R9
	ROUND3(AX, BX, CX, DX,  8, 0xfffa3942,  4)
	ROUND3(DX, AX, BX, CX, 11, 0x8771f681, 11)
	ROUND3(CX, DX, AX, BX, 14, 0x6d9d6122, 16)
	ROUND3(BX, CX, DX, AX,  1, 0xfde5380c, 23)
	ROUND3(AX, BX, CX, DX,  4, 0xa4beea44,  4)
	ROUND3(DX, AX, BX, CX,  7, 0x4bdecfa9, 11)
	ROUND3(CX, DX, AX, BX, 10, 0xf6bb4b60, 16)
	ROUND3(BX, CX, DX, AX, 13, 0xbebfbc70, 23)
	ROUND3(AX, BX, CX, DX,  0, 0x289b7ec6,  4)
	ROUND3(DX, AX, BX, CX,  3, 0xeaa127fa, 11)
	ROUND3(CX, DX, AX, BX,  6, 0xd4ef3085, 16)
	ROUND3(BX, CX, DX, AX,  9, 0x04881d05, 23)
	ROUND3(AX, BX, CX, DX, 12, 0xd9d4d039,  4)
	ROUND3(DX, AX, BX, CX, 15, 0xe6db99e5, 11)
	ROUND3(CX, DX, AX, BX,  2, 0x1fa27cf8, 16)
	ROUND3(BX, CX, DX, AX,  0, 0xc4ac5665, 23)

	MOVL	DX, R9
	NOTL	R9
	ROUND4(AX, BX, CX, DX,  7, 0xf4292244,  6)
	ROUND4(DX, AX, BX, CX, 14, 0x432aff97, 10)
	ROUND4(CX, DX, AX, BX,  5, 0xab9423a7, 15)
	ROUND4(BX, CX, DX, AX, 12, 0xfc93a039, 21)
	ROUND4(AX, BX, CX, DX,  3, 0x655b59c3,  6)
	ROUND4(DX, AX, BX, CX, 10, 0x8f0ccc92, 10)
	ROUND4(CX, DX, AX, BX,  1, 0xffeff47d, 15)
	ROUND4(BX, CX, DX, AX,  8, 0x85845dd1, 21)
	ROUND4(AX, BX, CX, DX, 15, 0x6fa87e4f,  6)
	ROUND4(DX, AX, BX, CX,  6, 0xfe2ce6e0, 10)
	ROUND4(CX, DX, AX, BX, 13, 0xa3014314, 15)
	ROUND4(BX, CX, DX, AX,  4, 0x4e0811a1, 21)
	ROUND4(AX, BX, CX, DX, 11, 0xf7537e82,  6)
	ROUND4(DX, AX, BX, CX,  2, 0xbd3af235, 10)
	ROUND4(CX, DX, AX, BX,  9, 0x2ad7d2bb, 15)
	ROUND4(BX, CX, DX, AX,  0, 0xeb86d391, 21)

	ADDL	AX, (0*4)(DI)
	ADDL	BX, (1*4)(DI)
	ADDL	CX, (2*4)(DI)
	ADDL	DX, (3*4)(DI)
	RET
