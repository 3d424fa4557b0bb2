/* tphost: the decoder's per-token small ops in C (docs/runtime.md, "Host numerics").
 *
 * Each function is the twin of a numpy function in generators/runtime/host/ops.py and gives
 * the same bits: IEEE-754 single precision, only correctly rounded operations (+ - * / sqrt,
 * conversions, compares) in the order written, no contraction (-ffp-contract=off), no
 * -ffast-math, FLT_EVAL_METHOD 0 (SSE2 on x86-64, NEON and VFP on ARMv7), with NEON's
 * flush-to-zero on the element-wise multiplies and adds (tphost.c). stdint types, no globals,
 * no allocation; the caller owns every buffer. Counts are uint32_t (32-bit pointers on the
 * board's Cortex-A9). Functions that can fail return a TPH_* code (0 = ok).
 */
#ifndef TPHOST_H
#define TPHOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* bumped when a signature or a numeric definition changes (the loader checks it) */
#define TPH_ABI 6

#define TPH_OK         0
#define TPH_NONFINITE (-1)   /* an input holds NaN or infinity */
#define TPH_TINY      (-2)   /* max|x| so small that the scale (127 / max|x|, 1 / step) overflows */
#define TPH_BADARG    (-3)   /* an argument outside the function's domain */

int32_t tph_abi(void);
/* the SHA-1 of tphost.h + tphost.c the library was built from (setup.py defines it) */
const char *tph_source(void);
/* the bodies built: "neon" (ARMv7 -mfpu=neon), "sse2" (x86-64), "portable" (-DTPH_PORTABLE
 * or another CPU), "portable-arm" (an ARM build without NEON: the loader says so) */
const char *tph_build(void);

/* ---- reductions */
/* sum of x[i]^2: lane i % 8 accumulates in order, lanes combined ((0+4)+(2+6))+((1+5)+(3+7)) */
float tph_sumsq(const float *x, uint32_t n);
/* max |x[i]| through the bit patterns (exact in any order); TPH_NONFINITE on NaN / inf */
int32_t tph_absmax(const float *x, uint32_t n, float *amax);
/* index of the first maximum (numpy.argmax: the first NaN if there is one); -1 if n == 0 */
int32_t tph_argmax(const float *x, uint32_t n);

/* ---- element-wise */
/* y = (x * (1 / sqrt(sumsq(x) / n + eps))) * w */
void tph_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *y);
/* rotate_half RoPE on heads rows of d: with h = d/2, a = x[i], b = x[i+h], c = cos_h[i],
 * s = sin_h[i]: y[i] = a*c - b*s, y[i+h] = b*c + a*s (x == y allowed) */
void tph_rope(const float *x, uint32_t heads, uint32_t d, const float *cos_h,
              const float *sin_h, float *y);
/* exp(x) from + - * and a power of two (Cephes expf's polynomial), x clamped to [-86, 88] */
void tph_exp(const float *x, uint32_t n, float *y);
/* y = (g / (1 + exp(-g))) * u */
void tph_silu_mul(const float *g, const float *u, uint32_t n, float *y);
/* y = a + b (y may be a or b) */
void tph_add(const float *a, const float *b, uint32_t n, float *y);

/* ---- quantisation */
/* per row of n: s = 127 / max|x| (1 if all zero), q = clamp(rint(x * s), -128, 127) */
int32_t tph_quantise_rows(const float *x, uint32_t rows, uint32_t n, int8_t *q, float *s);
/* engine results: y = ((float)acc * scale) * (1 / s) (INT8 and ternary rows) */
void tph_dequant_i32(const int32_t *acc, const float *scale, uint32_t n, float s, float *y);
/* engine results: y = v * (1 / s) (Q4_1 rows: float32 sums) */
void tph_dequant_f32(const float *v, uint32_t n, float s, float *y);
/* a B-vector frame's results (n rows, row r's B results together: acc[r * B + j]; B <= 256):
 * vector j dequantised with s[j] into y[j][0 .. n), the bits of dequant_i32 / dequant_f32 */
void tph_dequant_b_i32(const int32_t *acc, const float *scale, uint32_t n, uint32_t B,
                       const float *s, float *const *y);
void tph_dequant_b_f32(const float *v, uint32_t n, uint32_t B, const float *s, float *const *y);
/* The KV cache's running absmax step, in three parts (the cache's rows may be laid out as
 * the DMA memory needs: each part works on contiguous values) and their composition:
 * kv_step: m = max|x| over a K or V row x (d); if m > 127 * step: new = m / 127,
 *   *ratio = step / new when step > 0 (else 0), step = new, returns 1; else *ratio = 0,
 *   returns 0; a TPH_* error changes nothing.
 * kv_requantise: the cached values q = clamp(rint(q * ratio), -127, 127), in place; a ratio
 *   outside (0, 1 + 2^-20] (none that kv_step gives) is TPH_BADARG.
 * kv_row: q = clamp(rint(x * (1 / step)), -127, 127), zeros while step is 0 (x finite).
 * kv_append: row t of rows (row stride d): kv_step, kv_requantise of rows [0, t) when
 *   ratio > 0, kv_row into row t. */
int32_t tph_kv_step(const float *x, uint32_t d, float *step, float *ratio);
int32_t tph_kv_requantise(int8_t *q, uint32_t n, float ratio);
void tph_kv_row(const float *x, uint32_t d, float step, int8_t *q);
int32_t tph_kv_append(int8_t *rows, uint32_t t, uint32_t d, float *step, const float *x);
/* kv_row16: the INT16 cache's row (an INT16 attention engine, AttentionConfig.kv_bits = 16):
 * q = rint(clamp(x * (1 / step), -32767, 32767)), zeros while step is 0 (x finite). Fixed
 * steps only: the INT16 cache has no running absmax (no kv_step / kv_requantise twin). */
void tph_kv_row16(const float *x, uint32_t d, float step, int16_t *q);

/* ---- per-block activations (ggml's Q8_0 / Q8_1, generators/golden/blocks.py; docs/activations.md).
 * Not in the per-token path yet: the matrix engines take one INT8 step per vector until their
 * lanes take blocks. Per block b of 32 (n a multiple of 32, else TPH_BADARG): amax = max|x|,
 * d = amax / 127, id = d ? 1 / d : 0, q = roundf(x * id) (ties away from zero), d[b] and
 * s[b] = (float)sum(q) * d stored as fp16 (f32_to_f16). TPH_NONFINITE for NaN / inf; TPH_TINY
 * for a block with 0 < amax < 2^-118 (there NEON's flush of a subnormal x could change a code);
 * every block checked before anything is written. */
/* float -> IEEE binary16 bits: nearest, ties to even, subnormals, overflow to +-inf */
void tph_f32_to_f16(const float *x, uint32_t n, uint16_t *h);
int32_t tph_quantise_q8_0(const float *x, uint32_t n, int8_t *q, uint16_t *d);
int32_t tph_quantise_q8_1(const float *x, uint32_t n, int8_t *q, uint16_t *d, uint16_t *s);
/* x as two vectors of blocks, added by the host after the engine (docs/activations.md section
 * 7): (q0, d0, s0) = x's blocks as above; per block the residual r = x - f16(d0) * q0 (float:
 * the product exact, the subtraction rounded once), a block of r whose max|r| is below 2^-118
 * taken as zeros, and (q1, d1, s1) = r's blocks. s0 and s1 NULL: Q8_0 blocks. Codes as above,
 * from the first block checked before anything of (q1, d1, s1) is written. */
int32_t tph_quantise_parts(const float *x, uint32_t n, int8_t *q0, uint16_t *d0, uint16_t *s0,
                           int8_t *q1, uint16_t *d1, uint16_t *s1);

/* ---- attention */
/* golden.attention.score_multiplier: r = c * steps_per_octave / ln 2; the largest SHIFT <=
 * max_shift with MULT = round_half_even(r * 2^SHIFT) < 2^mult_bits (c = 0: 0, 0). double. */
int32_t tph_score_multiplier(double c, uint32_t steps_per_octave, uint32_t max_shift,
                             uint32_t mult_bits, uint32_t *mult, uint32_t *shift);
/* the score scale of one query head: k_step / (s_q * sqrt(d)), double */
double tph_score_scale(float k_step, float s_q, uint32_t d);
/* o[g][i] = (float)y[g][i] * (((float)Z[g] / (127 * 2^frac_bits)) * v_step), heads x d */
void tph_attention_out(const int8_t *y, const uint32_t *z, uint32_t heads, uint32_t d,
                       uint32_t frac_bits, float v_step, float *o);

/* ---- embedding rows */
/* fp16 bits -> float (exact, subnormals, inf and NaN payloads included) */
void tph_f16_to_f32(const uint16_t *h, uint32_t n, float *y);
/* GGUF Q8_0 blocks (34 bytes: fp16 d little-endian, 32 int8) -> n floats d * q */
void tph_embed_q8_0(const uint8_t *blocks, uint32_t n, float *y);
/* an INT8 row times its scale */
void tph_embed_int8(const int8_t *q, uint32_t n, float scale, float *y);

#ifdef __cplusplus
}
#endif
#endif /* TPHOST_H */
