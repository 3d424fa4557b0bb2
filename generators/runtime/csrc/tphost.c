/* tphost: the decoder's per-token small ops (tphost.h; numpy twins in hostops.py).
 *
 * Build with -ffp-contract=off and without -ffast-math (setup.py, the Makefile and the tests
 * do). The checks below stop a build whose floating point would not be the numpy path's.
 * Loops run over blocks of 8 with a fixed inner count so that gcc -O2 vectorises them on
 * x86-64 (SSE2) without reordering any rounding; a last partial block runs the same body.
 * On ARMv7 gcc never vectorises float arithmetic into NEON without
 * -funsafe-math-optimizations (NEON flushes subnormals), so floats stay on VFP (IEEE).
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
#if defined(__FP_FAST_FMAF) && !defined(TPH_ALLOW_FMA_HW)
/* FMA hardware is fine as long as -ffp-contract=off keeps a*b+c two roundings; the bit
 * tests catch a build that contracts. */
#endif

#ifndef TPH_SOURCE_SHA
#define TPH_SOURCE_SHA "unknown"
#endif

#define LANES 8u
#define MAGIC 12582912.0f         /* 1.5 * 2^23: (v + MAGIC) rounds v to an integer, half even */
#define MAGIC_BITS 0x4B400000u    /* the bits of MAGIC: bits(v + MAGIC) - MAGIC_BITS = rint(v) */
#define ABS_MASK 0x7FFFFFFFu
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

/* rint(v) for |v| <= 2^22 as an int32 (round half to even: the FPU's default mode) */
static inline int32_t rint_small(float v)
{
    return (int32_t)(f2u(v + MAGIC) - MAGIC_BITS);
}

static inline float clampf(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* ------------------------------------------------------------------ blocks of 8
 * Every loop body works on one block of LANES elements, one stage at a time with a fixed
 * count (the form gcc -O2 vectorises). A last partial block runs the same body on a
 * zero-padded copy. */

#define FOR_EACH_LANE(j) for (j = 0; j < LANES; j++)

/* copy m < LANES floats into a zero-padded block */
static inline void pad(float *dst, const float *src, uint32_t m)
{
    uint32_t j;
    FOR_EACH_LANE(j)
        dst[j] = 0.0f;
    memcpy(dst, src, m * sizeof *src);
}

/* ------------------------------------------------------------------ reductions */

static inline void sumsq8(float *acc, const float *x)
{
    uint32_t j;
    FOR_EACH_LANE(j)
        acc[j] = acc[j] + x[j] * x[j];
}

float tph_sumsq(const float *x, uint32_t n)
{
    float acc[LANES] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, xb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        sumsq8(acc, x + i);
    if (i < n) {
        pad(xb, x + i, n - i);
        sumsq8(acc, xb);          /* + 0 * 0 changes no lane */
    }
    {
        float t0 = acc[0] + acc[4], t1 = acc[1] + acc[5];
        float t2 = acc[2] + acc[6], t3 = acc[3] + acc[7];
        return (t0 + t2) + (t1 + t3);
    }
}

static inline void absmax8(uint32_t *m, const float *x)
{
    uint32_t b[LANES], j;
    memcpy(b, x, sizeof b);
    FOR_EACH_LANE(j) {
        uint32_t a = b[j] & ABS_MASK;
        m[j] = a > m[j] ? a : m[j];
    }
}

/* the bits of max|x| (>= INF_BITS: a NaN or an infinity) */
static uint32_t absmax_bits(const float *x, uint32_t n)
{
    uint32_t m[LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, i = 0, j, r;
    float xb[LANES];
    for (; i + LANES <= n; i += LANES)
        absmax8(m, x + i);
    if (i < n) {
        pad(xb, x + i, n - i);
        absmax8(m, xb);
    }
    r = m[0];
    for (j = 1; j < LANES; j++)
        r = m[j] > r ? m[j] : r;
    return r;
}

int32_t tph_absmax(const float *x, uint32_t n, float *amax)
{
    uint32_t r = absmax_bits(x, n);
    if (r >= INF_BITS)
        return TPH_NONFINITE;
    *amax = u2f(r);
    return TPH_OK;
}

static inline void max8(float *m, uint32_t *nan, const float *x)
{
    uint32_t j;
    FOR_EACH_LANE(j) {
        float v = x[j];
        m[j] = v > m[j] ? v : m[j];
        nan[j] |= v != v;
    }
}

int32_t tph_argmax(const float *x, uint32_t n)
{
    float m[LANES], xb[LANES], best;
    uint32_t nan[LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, i = 0, j, any = 0;
    if (n == 0)
        return -1;
    FOR_EACH_LANE(j)
        m[j] = -INFINITY;
    for (; i + LANES <= n; i += LANES)
        max8(m, nan, x + i);
    if (i < n) {
        pad(xb, x + i, n - i);
        for (j = n - i; j < LANES; j++)
            xb[j] = -INFINITY;
        max8(m, nan, xb);
    }
    FOR_EACH_LANE(j)
        any |= nan[j];
    if (any) {                    /* numpy.argmax: the first NaN */
        for (i = 0; i < n; i++)
            if (x[i] != x[i])
                return (int32_t)i;
    }
    best = m[0];
    for (j = 1; j < LANES; j++)
        best = m[j] > best ? m[j] : best;
    for (i = 0; i < n; i++)       /* the first element equal to the maximum */
        if (x[i] == best)
            return (int32_t)i;
    return 0;                     /* not reached: best is one of x */
}

/* ------------------------------------------------------------------ element-wise */

static inline void scale_mul8(float *y, const float *x, float c, const float *w)
{
    float t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        t[j] = (x[j] * c) * w[j];
    memcpy(y, t, sizeof t);
}

void tph_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *y)
{
    float ms = tph_sumsq(x, n) / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    float xb[LANES], wb[LANES], yb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        scale_mul8(y + i, x + i, inv, w + i);
    if (i < n) {
        pad(xb, x + i, n - i);
        pad(wb, w + i, n - i);
        scale_mul8(yb, xb, inv, wb);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
}

static inline void rope8(float *ya, float *yb, const float *xa, const float *xb,
                         const float *c, const float *s)
{
    float ta[LANES], tb[LANES];
    uint32_t j;
    FOR_EACH_LANE(j) {
        ta[j] = xa[j] * c[j] - xb[j] * s[j];
        tb[j] = xb[j] * c[j] + xa[j] * s[j];
    }
    memcpy(ya, ta, sizeof ta);
    memcpy(yb, tb, sizeof tb);
}

void tph_rope(const float *x, uint32_t heads, uint32_t d, const float *cos_h,
              const float *sin_h, float *y)
{
    uint32_t h = d / 2, g, i;
    for (g = 0; g < heads; g++) {
        const float *xa = x + (uint32_t)(g * d), *xb = xa + h;
        float *ya = y + (uint32_t)(g * d), *yb = ya + h;
        for (i = 0; i + LANES <= h; i += LANES)
            rope8(ya + i, yb + i, xa + i, xb + i, cos_h + i, sin_h + i);
        if (i < h) {
            float a[LANES], b[LANES], c[LANES], s[LANES], ra[LANES], rb[LANES];
            pad(a, xa + i, h - i);
            pad(b, xb + i, h - i);
            pad(c, cos_h + i, h - i);
            pad(s, sin_h + i, h - i);
            rope8(ra, rb, a, b, c, s);
            memcpy(ya + i, ra, (h - i) * sizeof *y);
            memcpy(yb + i, rb, (h - i) * sizeof *y);
        }
    }
}

/* exp of LANES values, in stages (numpy: hostops._exp, the same operations) */
static inline void exp8(float *y, const float *x)
{
    float xc[LANES], nf[LANES], r[LANES], p[LANES];
    uint32_t k[LANES], j;
    FOR_EACH_LANE(j)
        xc[j] = clampf(x[j], EXP_LO, EXP_HI);
    FOR_EACH_LANE(j) {
        float mg = xc[j] * EXP_LOG2E + MAGIC;   /* two roundings: contraction is off */
        k[j] = ((f2u(mg) - MAGIC_BITS) + 127u) << 23;   /* 2^n, n = rint(x / ln 2) */
        nf[j] = mg - MAGIC;
    }
    FOR_EACH_LANE(j)
        r[j] = (xc[j] - nf[j] * EXP_C1) - nf[j] * EXP_C2;
    FOR_EACH_LANE(j) {
        float q = EXP_P0;
        q = q * r[j] + EXP_P1;
        q = q * r[j] + EXP_P2;
        q = q * r[j] + EXP_P3;
        q = q * r[j] + EXP_P4;
        q = q * r[j] + EXP_P5;
        p[j] = (q * (r[j] * r[j]) + r[j]) + 1.0f;
    }
    FOR_EACH_LANE(j)
        y[j] = p[j] * u2f(k[j]);
}

void tph_exp(const float *x, uint32_t n, float *y)
{
    float xb[LANES], yb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        exp8(yb, x + i);
        memcpy(y + i, yb, sizeof yb);
    }
    if (i < n) {
        pad(xb, x + i, n - i);
        exp8(yb, xb);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
}

static inline void silu_mul8(float *y, const float *g, const float *u)
{
    float ng[LANES], e[LANES], t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        ng[j] = -g[j];
    exp8(e, ng);
    FOR_EACH_LANE(j)
        t[j] = (g[j] / (1.0f + e[j])) * u[j];
    memcpy(y, t, sizeof t);
}

void tph_silu_mul(const float *g, const float *u, uint32_t n, float *y)
{
    float gb[LANES], ub[LANES], yb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        silu_mul8(y + i, g + i, u + i);
    if (i < n) {
        pad(gb, g + i, n - i);
        pad(ub, u + i, n - i);
        silu_mul8(yb, gb, ub);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
}

static inline void add8(float *y, const float *a, const float *b)
{
    float t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        t[j] = a[j] + b[j];
    memcpy(y, t, sizeof t);
}

void tph_add(const float *a, const float *b, uint32_t n, float *y)
{
    float ab[LANES], bb[LANES], yb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        add8(y + i, a + i, b + i);
    if (i < n) {
        pad(ab, a + i, n - i);
        pad(bb, b + i, n - i);
        add8(yb, ab, bb);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
}

/* ------------------------------------------------------------------ quantisation */

/* q = rint(clamp(x * s, lo, hi)) (clamping to integer bounds first is the same as after) */
static inline void quant8(int8_t *q, const float *x, float s, float lo, float hi)
{
    float v[LANES];
    int8_t t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        v[j] = clampf(x[j] * s, lo, hi);
    FOR_EACH_LANE(j)
        t[j] = (int8_t)(int32_t)(f2u(v[j] + MAGIC) - MAGIC_BITS);
    memcpy(q, t, sizeof t);
}

static void quantise(const float *x, uint32_t n, float s, float lo, float hi, int8_t *q)
{
    float xb[LANES];
    int8_t qb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        quant8(q + i, x + i, s, lo, hi);
    if (i < n) {
        pad(xb, x + i, n - i);
        quant8(qb, xb, s, lo, hi);
        memcpy(q + i, qb, n - i);
    }
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
        quantise(x + (uint32_t)(r * n), n, s[r], -128.0f, 127.0f, q + (uint32_t)(r * n));
    return TPH_OK;
}

static inline void dequant_i32_8(float *y, const int32_t *acc, const float *scale, float inv)
{
    float t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        t[j] = ((float)acc[j] * scale[j]) * inv;
    memcpy(y, t, sizeof t);
}

void tph_dequant_i32(const int32_t *acc, const float *scale, uint32_t n, float s, float *y)
{
    float inv = 1.0f / s, sb[LANES], yb[LANES];
    int32_t ab[LANES];
    uint32_t i = 0, j;
    for (; i + LANES <= n; i += LANES)
        dequant_i32_8(y + i, acc + i, scale + i, inv);
    if (i < n) {
        FOR_EACH_LANE(j)
            ab[j] = 0;
        memcpy(ab, acc + i, (n - i) * sizeof *acc);
        pad(sb, scale + i, n - i);
        dequant_i32_8(yb, ab, sb, inv);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
}

static inline void mul8(float *y, const float *x, float c)
{
    float t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        t[j] = x[j] * c;
    memcpy(y, t, sizeof t);
}

void tph_dequant_f32(const float *v, uint32_t n, float s, float *y)
{
    float inv = 1.0f / s, vb[LANES], yb[LANES];
    uint32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        mul8(y + i, v + i, inv);
    if (i < n) {
        pad(vb, v + i, n - i);
        mul8(yb, vb, inv);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
}

/* q = rint(clamp(q * ratio, -127, 127)) on LANES INT8 values in place */
static inline void requant8(int8_t *q, float ratio)
{
    float v[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        v[j] = (float)q[j];
    quant8(q, v, ratio, -127.0f, 127.0f);
}

static void requantise(int8_t *rows, uint32_t k, float ratio)
{
    int8_t qb[LANES];
    uint32_t i = 0, j;
    for (; i + LANES <= k; i += LANES)
        requant8(rows + i, ratio);
    if (i < k) {
        FOR_EACH_LANE(j)
            qb[j] = 0;
        memcpy(qb, rows + i, k - i);
        requant8(qb, ratio);
        memcpy(rows + i, qb, k - i);
    }
}

int32_t tph_kv_append(int8_t *rows, uint32_t t, uint32_t d, float *step, const float *x)
{
    float old = *step;
    uint32_t m = absmax_bits(x, d);
    int32_t grew = 0;
    if (m >= INF_BITS)
        return TPH_NONFINITE;
    if (u2f(m) > 127.0f * old) {
        float nw = u2f(m) / 127.0f;
        if (!(1.0f / nw <= FLT_MAX))
            return TPH_TINY;
        if (old > 0.0f && t > 0)
            requantise(rows, t * d, old / nw);
        *step = old = nw;
        grew = 1;
    }
    if (old > 0.0f)
        quantise(x, d, 1.0f / old, -127.0f, 127.0f, rows + (uint32_t)(t * d));
    else
        memset(rows + (uint32_t)(t * d), 0, d);
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

/* y = (float)q * c on LANES INT8 values */
static inline void i8_mul8(float *y, const int8_t *q, float c)
{
    float t[LANES];
    uint32_t j;
    FOR_EACH_LANE(j)
        t[j] = (float)q[j] * c;
    memcpy(y, t, sizeof t);
}

/* n INT8 values times c */
static void i8_mul(float *y, const int8_t *q, uint32_t n, float c)
{
    int8_t qb[LANES];
    float yb[LANES];
    uint32_t i = 0, j;
    for (; i + LANES <= n; i += LANES)
        i8_mul8(y + i, q + i, c);
    if (i < n) {
        FOR_EACH_LANE(j)
            qb[j] = 0;
        memcpy(qb, q + i, n - i);
        i8_mul8(yb, qb, c);
        memcpy(y + i, yb, (n - i) * sizeof *y);
    }
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
