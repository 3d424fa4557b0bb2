/* tphost: the decoder's per-token small ops (tphost.h; numpy twins in hostops.py).
 *
 * Every kernel has one portable body (plain C99: what the board's ARMv7 runs, on its VFP)
 * and, for the hot ones, an SSE2 body (x86-64's baseline, 128-bit vectors as NEON's) that
 * performs the same IEEE operations in the same order, four lanes at a time; both give the
 * numpy path's bits (tests/test_hostops.py runs the vectors through both, and the portable
 * one under qemu-arm). -DTPH_PORTABLE builds the portable bodies on x86 too.
 *
 * Build with -ffp-contract=off and without -ffast-math (setup.py, tools/host_bench.py and
 * the tests do); the checks below stop a build whose floating point would differ. The ARM
 * build must keep floats off NEON (NEON flushes subnormals to zero): gcc uses NEON for
 * floats only with -funsafe-math-optimizations, and this file has no NEON code.
 */
#include "tphost.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "tphost needs FLT_EVAL_METHOD 0 (no excess precision: SSE2 on x86, VFP on ARM)"
#endif
#if defined(__FAST_MATH__)
#error "tphost must not be built with -ffast-math (it reorders and flushes)"
#endif

#if defined(__SSE2__) && !defined(TPH_PORTABLE)
#define TPH_SSE2 1
#include <emmintrin.h>
#else
#define TPH_SSE2 0
#endif

#ifndef TPH_SOURCE_SHA
#define TPH_SOURCE_SHA "unknown"
#endif

#define LANES 8u
#define MAGIC 12582912.0f         /* 1.5 * 2^23: (v + MAGIC) rounds |v| <= 2^22 to an integer */
#define MAGIC_BITS 0x4B400000u    /* the bits of MAGIC: bits(v + MAGIC) - MAGIC_BITS = rint(v) */
#define ABS_MASK 0x7FFFFFFFu
#define KV_RATIO_MAX (1.0f + 0x1p-20f)   /* above any ratio kv_step gives: 1 + 3 * 2^-24 */
#define INF_BITS 0x7F800000u

/* Cephes expf: exp(r) ~ 1 + r + r^2 (P5 + r (P4 + ... r P0)) on |r| <= ln2 / 2 */
#define EXP_LO (-86.0f)            /* exp(-86) * 0.70 is still a normal float */
#define EXP_HI 88.0f               /* exp(88) * 1.42 < FLT_MAX */
#define EXP_LOG2E 0x1.715476p+0f
#define EXP_C1 0x1.63p-1f          /* ln2 high part (0.693359375, 9 bits: n * C1 is exact) */
#define EXP_C2 (-0x1.bd0106p-13f)  /* ln2 - C1 */
#define EXP_P0 0x1.a0d2cep-13f
#define EXP_P1 0x1.6e879cp-10f
#define EXP_P2 0x1.111210p-7f
#define EXP_P3 0x1.555382p-5f
#define EXP_P4 0x1.555554p-3f
#define EXP_P5 0.5f

#define LN2 0.6931471805599453     /* math.log(2): the double nearest ln 2 */

int32_t tph_abi(void) { return TPH_ABI; }

const char *tph_source(void) { return TPH_SOURCE_SHA; }

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* clamp with NaN kept (numpy's minimum(maximum(v, lo), hi)) */
static inline float clampf(float v, float lo, float hi)
{
    v = lo > v ? lo : v;
    return hi < v ? hi : v;
}

/* rint(v) for |v| <= 2^22: round half to even (the FPU's default mode) */
static inline int32_t rint_small(float v)
{
    return (int32_t)(f2u(v + MAGIC) - MAGIC_BITS);
}

/* The quantisers' clamps (numpy: clip to [-128, 127] or [-127, 127]) are no-ops, so C leaves
 * them out: with u = 2^-24 and m = max|x| (exact),
 *   activations: s = fl(127 / m), |fl(x s)| <= m (127 / m)(1 + u)^2 < 127.5;
 *   KV row, no growth: m <= fl(127 step), inv = fl(1 / step): |fl(x inv)| <= 127 (1 + u)^3;
 *   KV row after growth: new = fl(m / 127), |fl(x fl(1 / new))| <= 127 (1 + u)^2 / (1 - u);
 *   requantised rows: m > fl(127 old) gives fl(old / new) <= (1 + u) / (1 - u)^2, |q| <= 127;
 * every product is below 127.5 in magnitude, so its rint lies in [-127, 127]. kv_row keeps its
 * clamp (it may be given any step); kv_requantise refuses a ratio kv_step cannot give. */

#if TPH_SSE2
static inline __m128 clamp4(__m128 v, __m128 lo, __m128 hi)
{
    /* maxps/minps return their second operand when one is NaN: v last keeps a NaN */
    return _mm_min_ps(hi, _mm_max_ps(lo, v));
}

/* 16 int8 -> four vectors of 4 floats (exact) */
static inline void i8x16_to_f32(const int8_t *q, __m128 *f)
{
    __m128i b = _mm_loadu_si128((const __m128i *)q);
    __m128i lo = _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8);
    __m128i hi = _mm_srai_epi16(_mm_unpackhi_epi8(b, b), 8);
    f[0] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(lo, lo), 16));
    f[1] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(lo, lo), 16));
    f[2] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(hi, hi), 16));
    f[3] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(hi, hi), 16));
}

/* x * s, clamped to [-127, 127] when clamp (x finite) */
static inline __m128i scaled4(const float *x, __m128 s, int clamp)
{
    __m128 v = _mm_mul_ps(_mm_loadu_ps(x), s);
    if (clamp)
        v = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(-127.0f)), _mm_set1_ps(127.0f));
    return _mm_cvtps_epi32(v);
}

/* 16 floats -> int8 rint(x * s) (|x s| < 127.5 or clamp): cvtps2dq rounds in the MXCSR's
 * mode, round to nearest even by default, as the MAGIC addition does */
static inline void quant16(const float *x, __m128 s, int8_t *q, int clamp)
{
    __m128i a = scaled4(x, s, clamp), b = scaled4(x + 4, s, clamp);
    __m128i c = scaled4(x + 8, s, clamp), d = scaled4(x + 12, s, clamp);
    _mm_storeu_si128((__m128i *)q, _mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d)));
}
#endif

/* ------------------------------------------------------------------ reductions */

float tph_sumsq(const float *x, uint32_t n)
{
    float l[LANES] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, t0, t1, t2, t3;
    uint32_t i = 0;
#if TPH_SSE2
    __m128 a = _mm_setzero_ps(), b = _mm_setzero_ps();
    const uint32_t n8 = n & ~7u;
    for (; i < n8; i += LANES) {
        __m128 u = _mm_loadu_ps(x + i), v = _mm_loadu_ps(x + i + 4);
        a = _mm_add_ps(a, _mm_mul_ps(u, u));
        b = _mm_add_ps(b, _mm_mul_ps(v, v));
    }
    _mm_storeu_ps(l, a);
    _mm_storeu_ps(l + 4, b);
#endif
    for (; i < n; i++)                 /* element i into lane i % 8, in order */
        l[i % LANES] = l[i % LANES] + x[i] * x[i];
    t0 = l[0] + l[4];
    t1 = l[1] + l[5];
    t2 = l[2] + l[6];
    t3 = l[3] + l[7];
    return (t0 + t2) + (t1 + t3);
}

/* the bits of max |x| (>= INF_BITS: a NaN or an infinity; the max is exact in any order) */
static uint32_t absmax_bits(const float *x, uint32_t n)
{
    uint32_t m = 0, i = 0;
#if TPH_SSE2
    if (n >= 16) {
        const uint32_t n16 = n & ~15u;
        __m128 mx = _mm_setzero_ps(), my = _mm_setzero_ps();
        const __m128 mask = _mm_castsi128_ps(_mm_set1_epi32(ABS_MASK));
        __m128i bad = _mm_setzero_si128();
        const __m128i fin = _mm_set1_epi32(INF_BITS - 1);
        uint32_t l[4];
        for (; i < n16; i += 16) {    /* maxps is exact for the finite values */
            __m128 a = _mm_and_ps(_mm_loadu_ps(x + i), mask);
            __m128 b = _mm_and_ps(_mm_loadu_ps(x + i + 4), mask);
            __m128 c = _mm_and_ps(_mm_loadu_ps(x + i + 8), mask);
            __m128 d = _mm_and_ps(_mm_loadu_ps(x + i + 12), mask);
            mx = _mm_max_ps(mx, _mm_max_ps(a, b));
            my = _mm_max_ps(my, _mm_max_ps(c, d));
            bad = _mm_or_si128(bad, _mm_or_si128(
                _mm_or_si128(_mm_cmpgt_epi32(_mm_castps_si128(a), fin),
                             _mm_cmpgt_epi32(_mm_castps_si128(b), fin)),
                _mm_or_si128(_mm_cmpgt_epi32(_mm_castps_si128(c), fin),
                             _mm_cmpgt_epi32(_mm_castps_si128(d), fin))));
        }
        mx = _mm_max_ps(mx, my);
        if (_mm_movemask_epi8(bad))
            return INF_BITS;           /* a NaN or an infinity */
        _mm_storeu_si128((__m128i *)l, _mm_castps_si128(mx));
        m = l[0] > l[1] ? l[0] : l[1];
        m = l[2] > m ? l[2] : m;
        m = l[3] > m ? l[3] : m;
    }
#endif
    for (; i < n; i++) {
        uint32_t a = f2u(x[i]) & ABS_MASK;
        m = a > m ? a : m;
    }
    return m;
}

int32_t tph_absmax(const float *x, uint32_t n, float *amax)
{
    uint32_t r = absmax_bits(x, n);
    if (r >= INF_BITS)
        return TPH_NONFINITE;
    *amax = u2f(r);
    return TPH_OK;
}

int32_t tph_argmax(const float *x, uint32_t n)
{
    float best = -INFINITY;
    uint32_t i = 0, nan = 0;
    if (n == 0)
        return -1;
#if TPH_SSE2
    {
        const uint32_t n8 = n & ~7u;
        __m128 m = _mm_set1_ps(-INFINITY), m2 = m, un = _mm_setzero_ps();
        float l[4];
        for (; i < n8; i += 8) {       /* NaN lanes: found below */
            __m128 v = _mm_loadu_ps(x + i), w = _mm_loadu_ps(x + i + 4);
            m = _mm_max_ps(m, v);
            m2 = _mm_max_ps(m2, w);
            un = _mm_or_ps(un, _mm_cmpunord_ps(v, w));
        }
        m = _mm_max_ps(m, m2);
        nan = (uint32_t)_mm_movemask_ps(un);
        _mm_storeu_ps(l, m);
        best = l[0] > l[1] ? l[0] : l[1];
        best = l[2] > best ? l[2] : best;
        best = l[3] > best ? l[3] : best;
    }
#endif
    for (; i < n; i++) {
        best = x[i] > best ? x[i] : best;
        nan |= x[i] != x[i];
    }
    if (nan) {                         /* numpy.argmax: the first NaN */
        for (i = 0; i < n; i++)
            if (x[i] != x[i])
                return (int32_t)i;
    }
    i = 0;
#if TPH_SSE2
    {
        const __m128 b = _mm_set1_ps(best);
        const uint32_t n8 = n & ~7u;
        for (; i < n8; i += 8) {
            int k = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i), b))
                  | _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i + 4), b)) << 4;
            if (k)
                return (int32_t)(i + (uint32_t)__builtin_ctz((unsigned)k));
        }
    }
#endif
    for (; i < n; i++)                 /* the first element equal to the maximum */
        if (x[i] == best)
            return (int32_t)i;
    return 0;                          /* not reached: best is one of x */
}

/* ------------------------------------------------------------------ element-wise */

void tph_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *y)
{
    float ms = tph_sumsq(x, n) / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    uint32_t i = 0;
#if TPH_SSE2
    const __m128 c = _mm_set1_ps(inv);
    const uint32_t n8 = n & ~7u;
    for (; i < n8; i += 8) {
        _mm_storeu_ps(y + i, _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(x + i), c), _mm_loadu_ps(w + i)));
        _mm_storeu_ps(y + i + 4, _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(x + i + 4), c),
                                            _mm_loadu_ps(w + i + 4)));
    }
#endif
    for (; i < n; i++)
        y[i] = (x[i] * inv) * w[i];
}

void tph_rope(const float *x, uint32_t heads, uint32_t d, const float *cos_h,
              const float *sin_h, float *y)
{
    uint32_t h = d / 2, g, i;
    for (g = 0; g < heads; g++) {
        const float *xa = x + (uint32_t)(g * d), *xb = xa + h;
        float *ya = y + (uint32_t)(g * d), *yb = ya + h;
        i = 0;
#if TPH_SSE2
        for (; i < (h & ~3u); i += 4) {
            __m128 a = _mm_loadu_ps(xa + i), b = _mm_loadu_ps(xb + i);
            __m128 c = _mm_loadu_ps(cos_h + i), s = _mm_loadu_ps(sin_h + i);
            _mm_storeu_ps(ya + i, _mm_sub_ps(_mm_mul_ps(a, c), _mm_mul_ps(b, s)));
            _mm_storeu_ps(yb + i, _mm_add_ps(_mm_mul_ps(b, c), _mm_mul_ps(a, s)));
        }
#endif
        for (; i < h; i++) {
            float a = xa[i], b = xb[i], c = cos_h[i], s = sin_h[i];
            ya[i] = a * c - b * s;
            yb[i] = b * c + a * s;
        }
    }
}

/* exp(x): n = rint(x / ln 2) from the MAGIC addition, r = x - n ln 2 in two parts, the
 * polynomial, times 2^n built from bits: (bits(x * log2e + MAGIC) + 127) << 23 (MAGIC_BITS
 * << 23 is 0 mod 2^32) */
static inline float exp1(float x)
{
    float xc = clampf(x, EXP_LO, EXP_HI), mg, nf, r, p;
    mg = xc * EXP_LOG2E + MAGIC;            /* two roundings: contraction is off */
    nf = mg - MAGIC;
    r = (xc - nf * EXP_C1) - nf * EXP_C2;
    p = EXP_P0;
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    p = (p * (r * r) + r) + 1.0f;
    return p * u2f((f2u(mg) + 127u) << 23);
}

#if TPH_SSE2
static inline __m128 exp4(__m128 x)
{
    const __m128 magic = _mm_set1_ps(MAGIC);
    __m128 xc = clamp4(x, _mm_set1_ps(EXP_LO), _mm_set1_ps(EXP_HI));
    __m128 mg = _mm_add_ps(_mm_mul_ps(xc, _mm_set1_ps(EXP_LOG2E)), magic);
    __m128 nf = _mm_sub_ps(mg, magic);
    __m128 r = _mm_sub_ps(_mm_sub_ps(xc, _mm_mul_ps(nf, _mm_set1_ps(EXP_C1))),
                          _mm_mul_ps(nf, _mm_set1_ps(EXP_C2)));
    __m128 p = _mm_set1_ps(EXP_P0);
    __m128i k = _mm_slli_epi32(_mm_add_epi32(_mm_castps_si128(mg), _mm_set1_epi32(127)), 23);
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P1));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P2));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P3));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P4));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P5));
    p = _mm_add_ps(_mm_add_ps(_mm_mul_ps(p, _mm_mul_ps(r, r)), r), _mm_set1_ps(1.0f));
    return _mm_mul_ps(p, _mm_castsi128_ps(k));
}
#endif

void tph_exp(const float *x, uint32_t n, float *y)
{
    uint32_t i = 0;
#if TPH_SSE2
    const uint32_t n4 = n & ~3u;
    for (; i < n4; i += 4)
        _mm_storeu_ps(y + i, exp4(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++)
        y[i] = exp1(x[i]);
}

void tph_silu_mul(const float *g, const float *u, uint32_t n, float *y)
{
    uint32_t i = 0;
#if TPH_SSE2
    const __m128 one = _mm_set1_ps(1.0f), sign = _mm_set1_ps(-0.0f);
    const uint32_t n4 = n & ~3u;
    for (; i < n4; i += 4) {
        __m128 gv = _mm_loadu_ps(g + i);
        __m128 e = exp4(_mm_xor_ps(gv, sign));
        _mm_storeu_ps(y + i, _mm_mul_ps(_mm_div_ps(gv, _mm_add_ps(one, e)), _mm_loadu_ps(u + i)));
    }
#endif
    for (; i < n; i++)
        y[i] = (g[i] / (1.0f + exp1(-g[i]))) * u[i];
}

void tph_add(const float *a, const float *b, uint32_t n, float *y)
{
    uint32_t i = 0;
#if TPH_SSE2
    const uint32_t n8 = n & ~7u;
    for (; i < n8; i += 8) {
        _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
        _mm_storeu_ps(y + i + 4, _mm_add_ps(_mm_loadu_ps(a + i + 4), _mm_loadu_ps(b + i + 4)));
    }
#endif
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

/* ------------------------------------------------------------------ quantisation */

/* q = rint(x * s): |x s| < 127.5 (above), or clamped to [-127, 127] when clamp (kv_row:
 * any step; x finite) */
static inline void quantise(const float *x, uint32_t n, float s, int8_t *q, int clamp)
{
    uint32_t i = 0;
#if TPH_SSE2
    for (; i < (n & ~15u); i += 16)
        quant16(x + i, _mm_set1_ps(s), q + i, clamp);
#endif
    for (; i < n; i++)
        q[i] = (int8_t)rint_small(clamp ? clampf(x[i] * s, -127.0f, 127.0f) : x[i] * s);
}

int32_t tph_quantise_rows(const float *x, uint32_t rows, uint32_t n, int8_t *q, float *s)
{
    uint32_t r;
    for (r = 0; r < rows; r++) {     /* every row checked before anything is written */
        uint32_t m = absmax_bits(x + (uint32_t)(r * n), n);
        if (m >= INF_BITS)
            return TPH_NONFINITE;
        if (m != 0 && !(127.0f / u2f(m) <= FLT_MAX))
            return TPH_TINY;
        s[r] = m ? 127.0f / u2f(m) : 1.0f;
    }
    for (r = 0; r < rows; r++)
        quantise(x + (uint32_t)(r * n), n, s[r], q + (uint32_t)(r * n), 0);
    return TPH_OK;
}

#if TPH_SSE2
/* y[0..3] = ((float)acc * scale) * c: the scalar loop's two roundings, 4 lanes */
static inline void dequant4(const int32_t *acc, const float *scale, __m128 c, float *y)
{
    __m128 a = _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)acc));
    _mm_storeu_ps(y, _mm_mul_ps(_mm_mul_ps(a, _mm_loadu_ps(scale)), c));
}
#endif

void tph_dequant_i32(const int32_t *acc, const float *scale, uint32_t n, float s, float *y)
{
    float inv = 1.0f / s;
    uint32_t i = 0;
#if TPH_SSE2
    const __m128 c = _mm_set1_ps(inv);
    for (; i < (n & ~15u); i += 16) {  /* 16 a pass: half the loop's instructions per result */
        dequant4(acc + i, scale + i, c, y + i);
        dequant4(acc + i + 4, scale + i + 4, c, y + i + 4);
        dequant4(acc + i + 8, scale + i + 8, c, y + i + 8);
        dequant4(acc + i + 12, scale + i + 12, c, y + i + 12);
    }
    for (; i < (n & ~3u); i += 4)
        dequant4(acc + i, scale + i, c, y + i);
#endif
    for (; i < n; i++)
        y[i] = ((float)acc[i] * scale[i]) * inv;
}

/* y = (float)q * c (exact int8 -> float) */
static void i8_mul(float *y, const int8_t *q, uint32_t n, float c)
{
    uint32_t i = 0;
#if TPH_SSE2
    const __m128 cv = _mm_set1_ps(c);
    const uint32_t n16 = n & ~15u;
    for (; i < n16; i += 16) {
        __m128 f[4];
        i8x16_to_f32(q + i, f);
        _mm_storeu_ps(y + i, _mm_mul_ps(f[0], cv));
        _mm_storeu_ps(y + i + 4, _mm_mul_ps(f[1], cv));
        _mm_storeu_ps(y + i + 8, _mm_mul_ps(f[2], cv));
        _mm_storeu_ps(y + i + 12, _mm_mul_ps(f[3], cv));
    }
#endif
    for (; i < n; i++)
        y[i] = (float)q[i] * c;
}

/* y = v * c, 8 at a time */
static void mul_f32(const float *v, uint32_t n, float c, float *y)
{
    uint32_t i = 0;
#if TPH_SSE2
    for (; i < (n & ~7u); i += 8) {
        _mm_storeu_ps(y + i, _mm_mul_ps(_mm_loadu_ps(v + i), _mm_set1_ps(c)));
        _mm_storeu_ps(y + i + 4, _mm_mul_ps(_mm_loadu_ps(v + i + 4), _mm_set1_ps(c)));
    }
#endif
    for (; i < n; i++)
        y[i] = v[i] * c;
}

void tph_dequant_f32(const float *v, uint32_t n, float s, float *y)
{
    mul_f32(v, n, 1.0f / s, y);
}

#if TPH_SSE2
/* 4 rows of a 2-vector frame's int32 results: split by vector (moves), then dequant4's
 * operations per vector */
static inline void dequant2x4_i32(const int32_t *acc, const float *scale, __m128 c0, __m128 c1,
                                  float *y0, float *y1)
{
    const __m128 a = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)acc));
    const __m128 b = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(acc + 4)));
    const __m128 sc = _mm_loadu_ps(scale);
    const __m128i v0 = _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m128i v1 = _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm_storeu_ps(y0, _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(v0), sc), c0));
    _mm_storeu_ps(y1, _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(v1), sc), c1));
}

static inline void dequant2x4_f32(const float *v, __m128 c0, __m128 c1, float *y0, float *y1)
{
    const __m128 a = _mm_loadu_ps(v), b = _mm_loadu_ps(v + 4);
    _mm_storeu_ps(y0, _mm_mul_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), c0));
    _mm_storeu_ps(y1, _mm_mul_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)), c1));
}
#endif

void tph_dequant_b_i32(const int32_t *acc, const float *scale, uint32_t n, uint32_t B,
                       const float *s, float *const *y)
{
    float inv[256];
    uint32_t i = 0, j;
    for (j = 0; j < B && j < 256u; j++)
        inv[j] = 1.0f / s[j];
#if TPH_SSE2
    if (B == 2u) {               /* 8 rows a pass: half the loop's instructions per result */
        const __m128 c0 = _mm_set1_ps(inv[0]), c1 = _mm_set1_ps(inv[1]);
        float *y0 = y[0], *y1 = y[1];
        for (; i < (n & ~7u); i += 8) {
            dequant2x4_i32(acc + 2u * i, scale + i, c0, c1, y0 + i, y1 + i);
            dequant2x4_i32(acc + 2u * i + 8u, scale + i + 4u, c0, c1, y0 + i + 4u, y1 + i + 4u);
        }
        for (; i < (n & ~3u); i += 4)
            dequant2x4_i32(acc + 2u * i, scale + i, c0, c1, y0 + i, y1 + i);
    }
#endif
    if (B == 2u) {               /* the portable body (the board's VFP build): a row a pass */
        float *y0 = y[0], *y1 = y[1];
        const float i0 = inv[0], i1 = inv[1];
        for (; i < n; i++) {
            const float sc = scale[i];
            y0[i] = ((float)acc[2u * i] * sc) * i0;
            y1[i] = ((float)acc[2u * i + 1u] * sc) * i1;
        }
    }
    for (; i < n; i++)
        for (j = 0; j < B; j++)
            y[j][i] = ((float)acc[i * B + j] * scale[i]) * inv[j];
}

void tph_dequant_b_f32(const float *v, uint32_t n, uint32_t B, const float *s, float *const *y)
{
    float inv[256];
    uint32_t i = 0, j;
    for (j = 0; j < B && j < 256u; j++)
        inv[j] = 1.0f / s[j];
#if TPH_SSE2
    if (B == 2u) {
        const __m128 c0 = _mm_set1_ps(inv[0]), c1 = _mm_set1_ps(inv[1]);
        float *y0 = y[0], *y1 = y[1];
        for (; i < (n & ~7u); i += 8) {
            dequant2x4_f32(v + 2u * i, c0, c1, y0 + i, y1 + i);
            dequant2x4_f32(v + 2u * i + 8u, c0, c1, y0 + i + 4u, y1 + i + 4u);
        }
        for (; i < (n & ~3u); i += 4)
            dequant2x4_f32(v + 2u * i, c0, c1, y0 + i, y1 + i);
    }
#endif
    if (B == 2u) {
        float *y0 = y[0], *y1 = y[1];
        const float i0 = inv[0], i1 = inv[1];
        for (; i < n; i++) {
            y0[i] = v[2u * i] * i0;
            y1[i] = v[2u * i + 1u] * i1;
        }
    }
    for (; i < n; i++)
        for (j = 0; j < B; j++)
            y[j][i] = v[i * B + j] * inv[j];
}

int32_t tph_kv_requantise(int8_t *q, uint32_t n, float ratio)
{
    float buf[256];          /* 256 at a time through floats ((float)q * 1 is exact) */
    uint32_t i, m;
    if (!(ratio > 0.0f && ratio <= KV_RATIO_MAX))
        return TPH_BADARG;   /* kv_step's ratios only: then |q ratio| < 127.5 (above) */
    for (i = 0; i < n; i += m) {
        m = n - i < 256 ? n - i : 256;
        i8_mul(buf, q + i, m, 1.0f);
        quantise(buf, m, ratio, q + i, 0);
    }
    return TPH_OK;
}

int32_t tph_kv_step(const float *x, uint32_t d, float *step, float *ratio)
{
    float old = *step, nw;
    uint32_t m = absmax_bits(x, d);
    if (m >= INF_BITS)
        return TPH_NONFINITE;
    *ratio = 0.0f;
    if (!(u2f(m) > 127.0f * old))
        return 0;
    nw = u2f(m) / 127.0f;
    if (!(1.0f / nw <= FLT_MAX))
        return TPH_TINY;
    if (old > 0.0f)
        *ratio = old / nw;
    *step = nw;
    return 1;
}

void tph_kv_row(const float *x, uint32_t d, float step, int8_t *q)
{
    if (step > 0.0f)
        quantise(x, d, 1.0f / step, q, 1);
    else
        memset(q, 0, d);
}

int32_t tph_kv_append(int8_t *rows, uint32_t t, uint32_t d, float *step, const float *x)
{
    float ratio;
    int32_t grew = tph_kv_step(x, d, step, &ratio);
    if (grew < 0)
        return grew;
    if (ratio > 0.0f && t > 0)
        tph_kv_requantise(rows, t * d, ratio);
    tph_kv_row(x, d, *step, rows + (uint32_t)(t * d));
    return grew;
}

/* ------------------------------------------------------------------ attention */

int32_t tph_score_multiplier(double c, uint32_t steps_per_octave, uint32_t max_shift,
                             uint32_t mult_bits, uint32_t *mult, uint32_t *shift)
{
    double r, limit;
    uint64_t bits;
    int32_t s, e;
    if (!(c >= 0.0 && c <= DBL_MAX) || max_shift > 62 || mult_bits > 52)
        return TPH_BADARG;
    r = c * (double)steps_per_octave / LN2;
    if (r == 0.0) {
        *mult = 0;
        *shift = 0;
        return TPH_OK;
    }
    if (!(r <= DBL_MAX))
        return TPH_BADARG;
    limit = (double)(1ull << mult_bits);
    /* r = f * 2^e, f in [0.5, 1): r * 2^(mult_bits - e) lies in [limit / 2, limit), so no
     * larger SHIFT can give MULT < limit; at most one step down when the rounding reaches
     * limit. The same answer as trying max_shift, max_shift - 1, ... in turn. */
    memcpy(&bits, &r, sizeof bits);
    e = (int32_t)((bits >> 52) & 0x7FF);
    s = e == 0 ? (int32_t)max_shift : (int32_t)mult_bits - (e - 1022);
    if (s > (int32_t)max_shift)
        s = (int32_t)max_shift;
    for (; s >= 0; s--) {
        double v = r * (double)(1ull << s);   /* exact: a power of two */
        double m = v < 4503599627370496.0 ? (v + 4503599627370496.0) - 4503599627370496.0 : v;
        if (m < limit) {
            *mult = (uint32_t)m;
            *shift = (uint32_t)s;
            return TPH_OK;
        }
    }
    return TPH_BADARG;
}

double tph_score_scale(float k_step, float s_q, uint32_t d)
{
    return (double)k_step / ((double)s_q * sqrt((double)d));
}

void tph_attention_out(const int8_t *y, const uint32_t *z, uint32_t heads, uint32_t d,
                       uint32_t frac_bits, float v_step, float *o)
{
    float den = 127.0f * (float)(1u << frac_bits);   /* exact: frac_bits <= 24 */
    uint32_t g;
    for (g = 0; g < heads; g++)
        i8_mul(o + (uint32_t)(g * d), y + (uint32_t)(g * d), d, ((float)z[g] / den) * v_step);
}

/* ------------------------------------------------------------------ embedding rows */

static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {                 /* zero or subnormal: m * 2^-24, exact */
        float f = (float)m * 0x1p-24f;
        return sign ? -f : f;
    }
    if (e == 31)                  /* inf, NaN (payload kept) */
        return u2f(sign | INF_BITS | (m << 13));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

void tph_f16_to_f32(const uint16_t *h, uint32_t n, float *y)
{
    uint32_t i;
    for (i = 0; i < n; i++)
        y[i] = f16_to_f32(h[i]);
}

void tph_embed_q8_0(const uint8_t *blocks, uint32_t n, float *y)
{
    uint32_t b, nb = (n + 31) / 32;
    for (b = 0; b < nb; b++) {
        const uint8_t *bl = blocks + (uint32_t)(b * 34);
        float d = f16_to_f32((uint16_t)(bl[0] | (bl[1] << 8)));
        uint32_t k = n - b * 32 < 32 ? n - b * 32 : 32;
        i8_mul(y + b * 32, (const int8_t *)(bl + 2), k, d);   /* d * q: exact in float */
    }
}

void tph_embed_int8(const int8_t *q, uint32_t n, float scale, float *y)
{
    i8_mul(y, q, n, scale);
}
