/* tphost: the decoder's per-token small ops (tphost.h; numpy twins in hostops.py).
 *
 * Every kernel has one portable body (plain C99: the board's VFP-only build) and, for the
 * hot ones, an SSE2 body (x86-64's baseline) and a NEON body (the board's build: -mfpu=neon)
 * that perform the same operations in the same order, four lanes at a time; all three give
 * the numpy path's bits (tests/runtime/host/test_hostops.py runs the vectors through SSE2 and portable on
 * x86, and through NEON and VFP under qemu-arm). -DTPH_PORTABLE builds the portable bodies
 * anywhere.
 *
 * The arithmetic is NEON's (ARMv7 Advanced SIMD: the standard FPSCR value): round to nearest
 * even, and flush-to-zero: a subnormal operand of a vector multiply, add, subtract, max or
 * min counts as a zero of its sign, and a result tiny before rounding (0 < |exact| < FLT_MIN,
 * even where it would round to FLT_MIN) is a zero of its sign (the twins' _fz, _mulz, _addz).
 * The other bodies compute the same: the portable ones with fz() / mulz() / addz() below, the
 * VFP-only ARM build in the VFP's own flush mode (FPSCR.FZ: ARM's definition), the SSE2 ones
 * in the MXCSR's flush mode plus an exact decision where x86's (tininess after rounding)
 * differs.
 * Division and sqrt have no NEON instruction: they stay IEEE (subnormals kept) on every
 * build, as do the scalar set-up values (1 / s, RMSNorm's mean). Results bound for int8
 * (quantisation, KV rows) do not depend on the flush (a tiny product rounds to 0 either way).
 * NaN: NEON returns the default NaN (0x7FC00000) where x86 propagates a payload; the float
 * kernels' bits are defined for inputs without NaN (the decoder refuses NaN at quantise).
 *
 * Build with -ffp-contract=off and without -ffast-math (setup.py, tools/host_bench.py and
 * the tests do); the checks below stop a build whose floating point would differ.
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

#if defined(__ARM_NEON) && !defined(TPH_PORTABLE)
#define TPH_NEON 1
#include <arm_neon.h>
#else
#define TPH_NEON 0
#endif

#if TPH_NEON
#define TPH_BUILD "neon"
#elif TPH_SSE2
#define TPH_BUILD "sse2"
#elif defined(__arm__)
#define TPH_BUILD "portable-arm"      /* hostlib warns: an ARM build without -mfpu=neon */
#else
#define TPH_BUILD "portable"
#endif

#ifndef TPH_SOURCE_SHA
#define TPH_SOURCE_SHA "unknown"
#endif

#define LANES 8u
#define MAGIC 12582912.0f         /* 1.5 * 2^23: (v + MAGIC) rounds |v| <= 2^22 to an integer */
#define MAGIC_BITS 0x4B400000u    /* the bits of MAGIC: bits(v + MAGIC) - MAGIC_BITS = rint(v) */
#define ABS_MASK 0x7FFFFFFFu
#define SIGN_BIT 0x80000000u
#define FLT_MIN_BITS 0x00800000u
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

const char *tph_build(void) { return TPH_BUILD; }

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

/* ---- NEON's flush-to-zero arithmetic in scalar C (the portable bodies, every tail) */

/* a subnormal becomes the zero of its sign (NEON's operand flush) */
static inline float fz(float v)
{
    uint32_t u = f2u(v);
    return (u & INF_BITS) ? v : u2f(u & SIGN_BIT);
}

/* a * b of flushed operands with NEON's result flush: tiny before rounding -> signed zero
 * (the product of two floats is exact in double: the one case rounding hides, an exact
 * product just below FLT_MIN rounding up to it, is decided there) */
static inline float mulz(float a, float b)
{
    float p = a * b;
    const uint32_t m = f2u(p) & ABS_MASK;    /* integer compares: no FPSCR transfer on ARM */
    if (m - 1u < FLT_MIN_BITS &&               /* 0 < |p| <= FLT_MIN */
        (m < FLT_MIN_BITS || fabs((double)a * (double)b) < (double)FLT_MIN))
        p = u2f(f2u(p) & SIGN_BIT);
    return p;
}

/* a + b, a - b of flushed operands: a tiny sum is exact (a subnormal), flushed */
static inline float addz(float a, float b) { return fz(a + b); }
static inline float subz(float a, float b) { return fz(a - b); }


/* The VFP-only ARM build runs its scalar loops in the VFP's own flush-to-zero mode (FPSCR.FZ:
 * ARM's definition, NEON's: tiny before rounding), set around the loop and restored after, with
 * plain operations (MZ, AZ, SZ, FZ); elsewhere those are the C computations above. Set-up
 * values computed before the mode changes (TPH_KEEP: gcc does not order float operations
 * against the FPSCR write otherwise). SiLU's division stays IEEE (outside the mode). */
#if defined(__arm__) && defined(__ARM_FP) && !TPH_NEON && !defined(TPH_PORTABLE)
#define TPH_VFP 1
static inline uint32_t vfp_fz_on(void)
{
    uint32_t c;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(c));
    __asm__ volatile("vmsr fpscr, %0" : : "r"(c | (1u << 24)) : "memory");
    return c;
}

static inline void vfp_fz_off(uint32_t c) { __asm__ volatile("vmsr fpscr, %0" : : "r"(c) : "memory"); }

#define VFZ_ON __asm__ volatile("" ::: "memory"); const uint32_t vcsr_ = vfp_fz_on();
#define VFZ_OFF __asm__ volatile("" ::: "memory"); vfp_fz_off(vcsr_);
#define VFP_KEEP(v) __asm__ volatile("" : "+t"(v))
#define MZ(a, b) ((a) * (b))
#define AZ(a, b) ((a) + (b))
#define SZ(a, b) ((a) - (b))
#define FZ(v) (v)
#else
#define TPH_VFP 0
#define VFZ_ON
#define VFZ_OFF
#define VFP_KEEP(v) ((void)0)
#define MZ(a, b) mulz(a, b)
#define AZ(a, b) addz(a, b)
#define SZ(a, b) subz(a, b)
#define FZ(v) fz(v)
#endif

/* rint(v) for |v| <= 2^22: round half to even (the FPU's default mode; a tiny or flushed v
 * gives 0 either way) */
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

/* NEON's bits on SSE2: the vector loops run inside ftz_on() / ftz_off() (the MXCSR's
 * flush-to-zero and denormals-are-zero, set around the loop, restored after): subnormal operands
 * read as zeros of their sign and tiny results become zeros, as on NEON, except that x86 decides
 * tininess after rounding: an exact product just below FLT_MIN that rounds to FLT_MIN stays
 * FLT_MIN. So fz4 and the sums are the plain operations there (a tiny sum is exact), and mulz4
 * sends a lane whose product is +-FLT_MIN to the scalar mulz; the scalar helpers give NEON's
 * bits in either mode. IEEE set-up values are computed before the mode changes (TPH_KEEP). */
#define MXCSR_FTZ_DAZ 0x8040u

static inline __m128 absmask4(void) { return _mm_castsi128_ps(_mm_set1_epi32((int)ABS_MASK)); }

static inline uint32_t ftz_on(void)
{
    const uint32_t c = _mm_getcsr();
    _mm_setcsr(c | MXCSR_FTZ_DAZ);
    return c;
}

static inline void ftz_off(uint32_t c) { _mm_setcsr(c); }

/* the MXCSR's mode for a vector loop: the IEEE set-up before it (TPH_KEEP: a value computed
 * before the mode changes; gcc does not order float operations against ldmxcsr otherwise) */
#define FTZ_ON __asm__ volatile("" ::: "memory"); const uint32_t csr_ = ftz_on();
#define FTZ_OFF __asm__ volatile("" ::: "memory"); ftz_off(csr_);
#define TPH_KEEP(v) __asm__ volatile("" : "+x"(v))
#else
#define FTZ_ON
#define FTZ_OFF
#define TPH_KEEP(v) ((void)0)
#endif
#if TPH_SSE2

/* inside ftz_on(): DAZ flushes every operand */
static inline __m128 fz4(__m128 v) { return v; }

/* a * b in the flush mode, NEON's bits: where a product is +-FLT_MIN, the exact product (in
 * double: exact for floats) decides; tiny ones become zeros of their sign (no call: the hot
 * loops keep their registers) */
static inline __m128 mulz4(__m128 a, __m128 b)
{
    const __m128 abs = absmask4();
    __m128 p = _mm_mul_ps(a, b);
    if (__builtin_expect(_mm_movemask_ps(_mm_cmpeq_ps(_mm_and_ps(p, abs),
                                                      _mm_set1_ps(FLT_MIN))), 0)) {
        const __m128d absd = _mm_castsi128_pd(_mm_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
        const __m128d mn = _mm_set1_pd((double)FLT_MIN);
        __m128d lo = _mm_mul_pd(_mm_cvtps_pd(a), _mm_cvtps_pd(b));
        __m128d hi = _mm_mul_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)),
                                _mm_cvtps_pd(_mm_movehl_ps(b, b)));
        __m128 tiny = _mm_shuffle_ps(_mm_castpd_ps(_mm_cmplt_pd(_mm_and_pd(lo, absd), mn)),
                                     _mm_castpd_ps(_mm_cmplt_pd(_mm_and_pd(hi, absd), mn)),
                                     _MM_SHUFFLE(2, 0, 2, 0));
        p = _mm_andnot_ps(_mm_and_ps(tiny, abs), p);
    }
    return p;
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

#if TPH_NEON
/* the bits of 4 floats */
static inline uint32x4_t bits4(const float *x) { return vreinterpretq_u32_f32(vld1q_f32(x)); }

/* 16 int8 -> four vectors of 4 floats (exact) */
static inline void i8x16_to_f32(const int8_t *q, float32x4_t *f)
{
    int8x16_t b = vld1q_s8(q);
    int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_s8(vget_high_s8(b));
    f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    f[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
    f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    f[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
}

/* bits(v + MAGIC) for |v| <= 2^22: MAGIC_BITS + rint(v) (NEON's vcvt truncates); its low byte
 * is rint(v) as an int8 (MAGIC_BITS' low byte is 0) */
static inline uint32x4_t magic4(float32x4_t v)
{
    return vreinterpretq_u32_f32(vaddq_f32(v, vdupq_n_f32(MAGIC)));
}

static inline uint32x4_t scaled4(float32x4_t x, float32x4_t s, int clamp)
{
    float32x4_t v = vmulq_f32(x, s);
    if (clamp)
        v = vminq_f32(vmaxq_f32(v, vdupq_n_f32(-127.0f)), vdupq_n_f32(127.0f));
    return magic4(v);
}

/* the low bytes of four vectors of 4 -> 16 int8 (two unzips of the low halves) */
static inline void store16(int8_t *q, uint32x4_t a, uint32x4_t b, uint32x4_t c, uint32x4_t d)
{
    uint16x8_t lo = vuzpq_u16(vreinterpretq_u16_u32(a), vreinterpretq_u16_u32(b)).val[0];
    uint16x8_t hi = vuzpq_u16(vreinterpretq_u16_u32(c), vreinterpretq_u16_u32(d)).val[0];
    vst1q_s8(q, vreinterpretq_s8_u8(vuzpq_u8(vreinterpretq_u8_u16(lo),
                                             vreinterpretq_u8_u16(hi)).val[0]));
}

static inline void quant16(const float *x, float32x4_t s, int8_t *q, int clamp)
{
    store16(q, scaled4(vld1q_f32(x), s, clamp), scaled4(vld1q_f32(x + 4), s, clamp),
            scaled4(vld1q_f32(x + 8), s, clamp), scaled4(vld1q_f32(x + 12), s, clamp));
}
#endif

/* ------------------------------------------------------------------ reductions */

float tph_sumsq(const float *x, uint32_t n)
{
    float l[LANES] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, t0, t1, t2, t3;
    uint32_t i = 0;
    const uint32_t n8 = n & ~7u;
#if TPH_SSE2
    FTZ_ON
    __m128 a = _mm_setzero_ps(), b = _mm_setzero_ps();
    for (; i < n8; i += LANES) {
        __m128 u = fz4(_mm_loadu_ps(x + i)), v = fz4(_mm_loadu_ps(x + i + 4));
        a = _mm_add_ps(a, mulz4(u, u));
        b = _mm_add_ps(b, mulz4(v, v));
    }
    _mm_storeu_ps(l, a);
    _mm_storeu_ps(l + 4, b);
    FTZ_OFF
#elif TPH_NEON
    float32x4_t a = vdupq_n_f32(0.0f), b = a;
    for (; i < n8; i += LANES) {
        float32x4_t u = vld1q_f32(x + i), v = vld1q_f32(x + i + 4);
        a = vaddq_f32(a, vmulq_f32(u, u));
        b = vaddq_f32(b, vmulq_f32(v, v));
    }
    vst1q_f32(l, a);
    vst1q_f32(l + 4, b);
#else
    (void)n8;
#endif
    {
        float r;
        VFZ_ON
        for (; i < n; i++) {           /* element i into lane i % 8, in order */
            const float v = FZ(x[i]);
            l[i % LANES] = AZ(l[i % LANES], MZ(v, v));
        }
        t0 = AZ(l[0], l[4]);
        t1 = AZ(l[1], l[5]);
        t2 = AZ(l[2], l[6]);
        t3 = AZ(l[3], l[7]);
        r = AZ(AZ(t0, t2), AZ(t1, t3));
        VFP_KEEP(r);
        VFZ_OFF
        return r;
    }
}

/* the bits of max |x| (>= INF_BITS: a NaN or an infinity; the max is exact in any order) */
static uint32_t absmax_bits(const float *x, uint32_t n)
{
    uint32_t m = 0, i = 0;
#if TPH_SSE2
    if (n >= 16) {
        const uint32_t n16 = n & ~15u;
        __m128 mx = _mm_setzero_ps(), my = _mm_setzero_ps();
        const __m128 mask = absmask4();
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
#elif TPH_NEON
    if (n >= 16) {                     /* unsigned max of the bits: exact, no float compare */
        const uint32_t n16 = n & ~15u;
        const uint32x4_t mask = vdupq_n_u32(ABS_MASK);
        uint32x4_t mx = vdupq_n_u32(0), my = mx;
        uint32x2_t h;
        for (; i < n16; i += 16) {
            mx = vmaxq_u32(mx, vmaxq_u32(vandq_u32(bits4(x + i), mask),
                                         vandq_u32(bits4(x + i + 4), mask)));
            my = vmaxq_u32(my, vmaxq_u32(vandq_u32(bits4(x + i + 8), mask),
                                         vandq_u32(bits4(x + i + 12), mask)));
        }
        mx = vmaxq_u32(mx, my);
        h = vpmax_u32(vget_low_u32(mx), vget_high_u32(mx));
        h = vpmax_u32(h, h);
        m = vget_lane_u32(h, 0);
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
#elif TPH_NEON
    if (n >= 8) {                      /* integers only: NEON's float compares flush */
        /* on the bits: the signed max is the largest float when one is >= +0; when all are
         * negative the largest is the unsigned min (smallest magnitude); a NaN shows as a
         * signed max above +inf or an unsigned max above -inf */
        const uint32_t n8 = n & ~7u;
        int32x4_t smax = vdupq_n_s32(INT32_MIN), smax2 = smax;
        uint32x4_t umin = vdupq_n_u32(0xFFFFFFFFu), umin2 = umin, umax = vdupq_n_u32(0);
        uint32x2_t h;
        int32x2_t hs;
        uint32_t lo, hi;
        int32_t top;
        for (; i < n8; i += 8) {
            const uint32x4_t v = bits4(x + i), w = bits4(x + i + 4);
            smax = vmaxq_s32(smax, vreinterpretq_s32_u32(v));
            smax2 = vmaxq_s32(smax2, vreinterpretq_s32_u32(w));
            umin = vminq_u32(umin, v);
            umin2 = vminq_u32(umin2, w);
            umax = vmaxq_u32(umax, vmaxq_u32(v, w));
        }
        smax = vmaxq_s32(smax, smax2);
        umin = vminq_u32(umin, umin2);
        hs = vpmax_s32(vget_low_s32(smax), vget_high_s32(smax));
        top = vget_lane_s32(vpmax_s32(hs, hs), 0);
        h = vpmin_u32(vget_low_u32(umin), vget_high_u32(umin));
        lo = vget_lane_u32(vpmin_u32(h, h), 0);
        h = vpmax_u32(vget_low_u32(umax), vget_high_u32(umax));
        hi = vget_lane_u32(vpmax_u32(h, h), 0);
        nan = top > (int32_t)INF_BITS || hi > (SIGN_BIT | INF_BITS);
        best = u2f(top >= 0 ? (uint32_t)top : lo);
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
#elif TPH_NEON
    {   /* the first x equal to best: equal bits, or either zero when best is a zero */
        const uint32_t bb = f2u(best), mk = (bb & ABS_MASK) ? 0xFFFFFFFFu : ABS_MASK;
        const uint32x4_t want = vdupq_n_u32(bb & mk), mask = vdupq_n_u32(mk);
        const uint32_t n16 = n & ~15u;
        for (; i < n16; i += 16) {
            uint32x4_t e = vorrq_u32(
                vorrq_u32(vceqq_u32(vandq_u32(bits4(x + i), mask), want),
                          vceqq_u32(vandq_u32(bits4(x + i + 4), mask), want)),
                vorrq_u32(vceqq_u32(vandq_u32(bits4(x + i + 8), mask), want),
                          vceqq_u32(vandq_u32(bits4(x + i + 12), mask), want)));
            uint32x2_t r = vorr_u32(vget_low_u32(e), vget_high_u32(e));
            if (vget_lane_u32(vpmax_u32(r, r), 0))
                break;                 /* in these 16: the scalar loop finds it */
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
    float inv = fz(1.0f / sqrtf(ms + eps));    /* IEEE (VFP), flushed as NEON reads it */
    TPH_KEEP(inv);
    uint32_t i = 0;
    const uint32_t n8 = n & ~7u;
#if TPH_SSE2
    FTZ_ON
    const __m128 c = _mm_set1_ps(inv);
    for (; i < n8; i += 8) {
        _mm_storeu_ps(y + i, mulz4(mulz4(fz4(_mm_loadu_ps(x + i)), c),
                                   fz4(_mm_loadu_ps(w + i))));
        _mm_storeu_ps(y + i + 4, mulz4(mulz4(fz4(_mm_loadu_ps(x + i + 4)), c),
                                       fz4(_mm_loadu_ps(w + i + 4))));
    }
    FTZ_OFF
#elif TPH_NEON
    const float32x4_t c = vdupq_n_f32(inv);
    for (; i < n8; i += 8) {
        vst1q_f32(y + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), c), vld1q_f32(w + i)));
        vst1q_f32(y + i + 4, vmulq_f32(vmulq_f32(vld1q_f32(x + i + 4), c), vld1q_f32(w + i + 4)));
    }
#else
    (void)n8;
#endif
    VFP_KEEP(inv);
    {
        VFZ_ON
        for (; i < n; i++)
            y[i] = MZ(MZ(FZ(x[i]), inv), FZ(w[i]));
        VFZ_OFF
    }
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
        FTZ_ON
        for (; i < (h & ~3u); i += 4) {
            __m128 a = fz4(_mm_loadu_ps(xa + i)), b = fz4(_mm_loadu_ps(xb + i));
            __m128 c = fz4(_mm_loadu_ps(cos_h + i)), s = fz4(_mm_loadu_ps(sin_h + i));
            _mm_storeu_ps(ya + i, _mm_sub_ps(mulz4(a, c), mulz4(b, s)));
            _mm_storeu_ps(yb + i, _mm_add_ps(mulz4(b, c), mulz4(a, s)));
        }
        FTZ_OFF
#elif TPH_NEON
        for (; i < (h & ~3u); i += 4) {
            float32x4_t a = vld1q_f32(xa + i), b = vld1q_f32(xb + i);
            float32x4_t c = vld1q_f32(cos_h + i), s = vld1q_f32(sin_h + i);
            vst1q_f32(ya + i, vsubq_f32(vmulq_f32(a, c), vmulq_f32(b, s)));
            vst1q_f32(yb + i, vaddq_f32(vmulq_f32(b, c), vmulq_f32(a, s)));
        }
#endif
        {
            VFZ_ON
            for (; i < h; i++) {
                float a = FZ(xa[i]), b = FZ(xb[i]), c = FZ(cos_h[i]), s = FZ(sin_h[i]);
                ya[i] = SZ(MZ(a, c), MZ(b, s));
                yb[i] = AZ(MZ(b, c), MZ(a, s));
            }
            VFZ_OFF
        }
    }
}

/* exp(x): n = rint(x / ln 2) from the MAGIC addition, r = x - n ln 2 in two parts, the
 * polynomial, times 2^n built from bits: (bits(x * log2e + MAGIC) + 127) << 23 (MAGIC_BITS
 * << 23 is 0 mod 2^32). NEON's flush never changes these bits (exp4's proof below: no
 * operation meets a subnormal, and a flushed or tiny x gives exactly 1 either way), so the
 * scalar body is plain IEEE arithmetic. */
static inline float exp1(float x)
{
    float xc = x, mg, nf, r, p;
    xc = EXP_LO > xc ? EXP_LO : xc;
    xc = EXP_HI < xc ? EXP_HI : xc;
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
/* exp of 4 lanes: IEEE's bits are NEON's here, whatever the mode. With xc the clamped x:
 * |xc| < 2^-60 (or flushed): every path gives (q r^2 + r) + 1 = 1 exactly (|r| < 2^-60), so
 * exp = 1 with or without a flush on the way. n = 0, |xc| >= 2^-60: r = xc, r^2 >= 2^-120 and
 * every product >= 2^-121; the sums stay above 2^-14 (the coefficients) or near r or 1.
 * n != 0: |xc| > ln2/2, so xc and n C1 (9 bits times 8) are multiples of 2^-25 and of 2^-48
 * with n C2 (|n C2| >= 2^-14): r = 0 or |r| >= 2^-48, r^2 >= 2^-96; p 2^n >= 0.7 * 2^-124.
 * No operation meets a subnormal. (The flushing scalar exp1 gives the same.) */
static inline __m128 exp4(__m128 x)
{
    const __m128 magic = _mm_set1_ps(MAGIC);
    __m128 xc = _mm_min_ps(_mm_set1_ps(EXP_HI), _mm_max_ps(_mm_set1_ps(EXP_LO), x));
    __m128 mg, nf, r, p;
    __m128i k;
    mg = _mm_add_ps(_mm_mul_ps(xc, _mm_set1_ps(EXP_LOG2E)), magic);
    nf = _mm_sub_ps(mg, magic);
    r = _mm_sub_ps(_mm_sub_ps(xc, _mm_mul_ps(nf, _mm_set1_ps(EXP_C1))),
                   _mm_mul_ps(nf, _mm_set1_ps(EXP_C2)));
    p = _mm_set1_ps(EXP_P0);
    k = _mm_slli_epi32(_mm_add_epi32(_mm_castps_si128(mg), _mm_set1_epi32(127)), 23);
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P1));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P2));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P3));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P4));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P5));
    p = _mm_add_ps(_mm_add_ps(_mm_mul_ps(p, _mm_mul_ps(r, r)), r), _mm_set1_ps(1.0f));
    return _mm_mul_ps(p, _mm_castsi128_ps(k));
}
#endif

#if TPH_NEON
/* exp4's constants, loaded once per loop: the four multipliers as lanes of two d registers
 * (a product by a lane is the same IEEE product), the rest as vectors, so a loop keeps them
 * all in registers (with every constant a vector, gcc reloads seven of them per iteration) */
typedef struct {
    float32x2_t kl, kh;           /* LOG2E, C1 | C2, P0 */
    float32x4_t lo, hi, magic, p1, p2, p3, p4, p5, one;
    uint32x4_t b127;
} exp_k;

static inline exp_k exp_consts(void)
{
    static const float kmul[4] = {EXP_LOG2E, EXP_C1, EXP_C2, EXP_P0};
    const float32x4_t km = vld1q_f32(kmul);
    exp_k k;
    k.kl = vget_low_f32(km);
    k.kh = vget_high_f32(km);
    k.lo = vdupq_n_f32(EXP_LO);
    k.hi = vdupq_n_f32(EXP_HI);
    k.magic = vdupq_n_f32(MAGIC);
    k.p1 = vdupq_n_f32(EXP_P1);
    k.p2 = vdupq_n_f32(EXP_P2);
    k.p3 = vdupq_n_f32(EXP_P3);
    k.p4 = vdupq_n_f32(EXP_P4);
    k.p5 = vdupq_n_f32(EXP_P5);
    k.one = vdupq_n_f32(1.0f);
    k.b127 = vdupq_n_u32(127);
    return k;
}

static inline float32x4_t exp4(float32x4_t x, const exp_k *k)
{
    const float32x4_t xc = vminq_f32(vmaxq_f32(x, k->lo), k->hi);
    const float32x4_t mg = vaddq_f32(vmulq_lane_f32(xc, k->kl, 0), k->magic);
    const float32x4_t nf = vsubq_f32(mg, k->magic);
    const float32x4_t r = vsubq_f32(vsubq_f32(xc, vmulq_lane_f32(nf, k->kl, 1)),
                                    vmulq_lane_f32(nf, k->kh, 0));
    const uint32x4_t e = vshlq_n_u32(vaddq_u32(vreinterpretq_u32_f32(mg), k->b127), 23);
    float32x4_t p = vaddq_f32(vmulq_lane_f32(r, k->kh, 1), k->p1);
    p = vaddq_f32(vmulq_f32(p, r), k->p2);
    p = vaddq_f32(vmulq_f32(p, r), k->p3);
    p = vaddq_f32(vmulq_f32(p, r), k->p4);
    p = vaddq_f32(vmulq_f32(p, r), k->p5);
    p = vaddq_f32(vaddq_f32(vmulq_f32(p, vmulq_f32(r, r)), r), k->one);
    return vmulq_f32(p, vreinterpretq_f32_u32(e));
}
#endif

void tph_exp(const float *x, uint32_t n, float *y)
{
    uint32_t i = 0;
    const uint32_t n4 = n & ~3u;
#if TPH_SSE2
    for (; i < n4; i += 4)
        _mm_storeu_ps(y + i, exp4(_mm_loadu_ps(x + i)));
#elif TPH_NEON
    const exp_k k = exp_consts();
    for (; i < n4; i += 4)
        vst1q_f32(y + i, exp4(vld1q_f32(x + i), &k));
#else
    (void)n4;
#endif
    for (; i < n; i++)
        y[i] = exp1(x[i]);
}


/* (g / (1 + exp(-g))) * u: the division IEEE (no NEON divide: the VFP's, lane by lane, on
 * the unflushed g), the rest NEON's */
static inline float silu1(float g, float u)
{
    return mulz(fz(g / addz(1.0f, exp1(u2f(f2u(g) ^ SIGN_BIT)))), fz(u));
}

#if TPH_SSE2
/* 4 lanes of silu1 in IEEE mode (the division's), back to the flush after */
static __attribute__((noinline)) void silu4_slow(const float *g, const float *u, float *y,
                                                 uint32_t csr)
{
    uint32_t k;
    ftz_off(csr);
    for (k = 0; k < 4; k++)
        y[k] = silu1(g[k], u[k]);
    ftz_on();
}
#endif

void tph_silu_mul(const float *g, const float *u, uint32_t n, float *y)
{
    uint32_t i = 0;
    const uint32_t n4 = n & ~3u;
#if TPH_SSE2
    /* in the flush mode: exp4 meets no subnormal but a flushed operand (above); the division
     * is IEEE on the board (the VFP's): where |g / den| <= 2 FLT_MIN (or 0) x86's flush may
     * differ, so those lanes run silu1 in IEEE mode */
    const __m128 one = _mm_set1_ps(1.0f), sign = _mm_set1_ps(-0.0f);
    FTZ_ON
    while (i < n4) {
        for (; i < n4; i += 4) {     /* (the rare group leaves the loop: no call inside it) */
            __m128 gv = _mm_loadu_ps(g + i);
            __m128 q = _mm_div_ps(gv, _mm_add_ps(one, exp4(_mm_xor_ps(gv, sign))));
            if (_mm_movemask_ps(_mm_cmple_ps(_mm_and_ps(q, absmask4()),
                                             _mm_set1_ps(2.0f * FLT_MIN))))
                break;
            _mm_storeu_ps(y + i, mulz4(q, _mm_loadu_ps(u + i)));
        }
        if (i < n4) {
            silu4_slow(g + i, u + i, y + i, csr_);
            i += 4;
        }
    }
    FTZ_OFF
#elif TPH_NEON
    /* NEON's 1 + exp(-g) (exp4's constants held in registers for the whole loop), then the
     * VFP's four divides of g by it straight from the lanes of q0 and q1 and NEON's product
     * with u: one pass, no buffer (make host-bench: SiLU*up from 14.4 to about 10 ARMv7
     * instructions an element) */
    const exp_k k = exp_consts();
    const uint32x4_t sign = vdupq_n_u32(SIGN_BIT);
    for (; i < n4; i += 4) {
        const float32x4_t gv = vld1q_f32(g + i);
        const float32x4_t den = vaddq_f32(k.one, exp4(vreinterpretq_f32_u32(
            veorq_u32(vreinterpretq_u32_f32(gv), sign)), &k));
        {   /* the two register variables set right before the asm, nothing between (gcc's
             * rule for local register variables as asm operands) */
            register float32x4_t q0 __asm__("q0") = gv;
            register float32x4_t q1 __asm__("q1") = den;
            __asm__("vdiv.f32 s0, s0, s4\n\t"
                    "vdiv.f32 s1, s1, s5\n\t"
                    "vdiv.f32 s2, s2, s6\n\t"
                    "vdiv.f32 s3, s3, s7"
                    : "+w"(q0) : "w"(q1));
            vst1q_f32(y + i, vmulq_f32(q0, vld1q_f32(u + i)));
        }
    }
#else
    (void)n4;
#endif
    for (; i < n; i++)
        y[i] = silu1(g[i], u[i]);
}

void tph_add(const float *a, const float *b, uint32_t n, float *y)
{
    uint32_t i = 0;
    const uint32_t n8 = n & ~7u;
#if TPH_SSE2
    FTZ_ON
    for (; i < n8; i += 8) {
        _mm_storeu_ps(y + i, _mm_add_ps(fz4(_mm_loadu_ps(a + i)), fz4(_mm_loadu_ps(b + i))));
        _mm_storeu_ps(y + i + 4, _mm_add_ps(fz4(_mm_loadu_ps(a + i + 4)), fz4(_mm_loadu_ps(b + i + 4))));
    }
    FTZ_OFF
#elif TPH_NEON
    for (; i < n8; i += 8) {
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
        vst1q_f32(y + i + 4, vaddq_f32(vld1q_f32(a + i + 4), vld1q_f32(b + i + 4)));
    }
#else
    (void)n8;
#endif
    {
        VFZ_ON
        for (; i < n; i++)
            y[i] = AZ(FZ(a[i]), FZ(b[i]));
        VFZ_OFF
    }
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
#elif TPH_NEON
    for (; i < (n & ~15u); i += 16)
        quant16(x + i, vdupq_n_f32(s), q + i, clamp);
#endif
    for (; i < n; i++) {
        const float v = x[i] * s;
        q[i] = (int8_t)rint_small(clamp ? (v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v) : v);
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
        quantise(x + (uint32_t)(r * n), n, s[r], q + (uint32_t)(r * n), 0);
    return TPH_OK;
}

/* ------------------------------------------------------------------ per-block activations */

/* ggml's quantize_row_q8_0_ref / quantize_row_q8_1_ref (ggml-org/ggml d99724f2,
 * src/ggml-quants.c), written from their definition; the twin is generators/golden/blocks.py
 * (through hostops.quantise_q8_0 / _q8_1). */
#define BLK 32u
/* tph_quantise_q8_1 keeps the absmax of this many blocks from its check (K <= 2048: all) */
#define AMAX_KEPT 64u
#define HALF_BITS 0x3F000000u         /* bits of 0.5f */
#define BLK_AMAX_MIN_BITS 0x04800000u   /* 2^-118: the smallest nonzero block max|x| taken */

/* float -> binary16 bits, nearest even (GGML_FP32_TO_FP16 computes the same): a NaN gives a
 * quiet NaN of its sign (outside the twins' domain) */
static inline uint16_t f32_to_f16(float f)
{
    const uint32_t u = f2u(f), a = u & ABS_MASK;
    const uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t mant, shift, q, rem, half;
    if (a > INF_BITS)
        return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u)                   /* >= 65520 (the tie above 65504): infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (a >= 0x38800000u)                   /* >= 2^-14: normal; round at bit 13, rebias */
        return (uint16_t)(sign | ((a + 0xFFFu + ((a >> 13) & 1u) - 0x38000000u) >> 13));
    if (a <= 0x33000000u)                   /* <= 2^-25 (a tie with 0 at most): zero */
        return (uint16_t)sign;
    /* subnormal: |f| / 2^-24 = mant * 2^(e - 126), e = 102..112, rounded to nearest even */
    mant = (a & 0x7FFFFFu) | 0x800000u;
    shift = 126u - (a >> 23);
    q = mant >> shift;
    rem = mant & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
    q += (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
    return (uint16_t)(sign | q);
}

void tph_f32_to_f16(const float *x, uint32_t n, uint16_t *h)
{
    uint32_t i;
    for (i = 0; i < n; i++)
        h[i] = f32_to_f16(x[i]);
}

/* C's roundf (nearest, ties away from zero) of |v| < 2^23 by truncation: v - trunc(v) is exact */
static inline int32_t round_away(float v)
{
    const int32_t t = (int32_t)v;
    const float r = v - (float)t;
    return t + (r >= 0.5f ? 1 : 0) - (r <= -0.5f ? 1 : 0);
}

#if TPH_NEON
/* roundf of 4 lanes by truncation, the remainder's test on its bits (integer compares: gcc 12
 * without -ffast-math turns vcgeq_f32 / vcleq_f32 into a scalar VFP compare and an FPSCR
 * transfer per lane, measured 2.1 M instructions of a Q4_1 token on the board's build):
 * |r| >= 0.5 <=> (bits(r) & ABS_MASK) >= bits(0.5f); the step is +1 or -1 by r's sign. */
static inline int32x4_t round_away4(float32x4_t v)
{
    const int32x4_t t = vcvtq_s32_f32(v);                                     /* truncates */
    const uint32x4_t r = vreinterpretq_u32_f32(vsubq_f32(v, vcvtq_f32_s32(t)));  /* exact */
    const uint32x4_t big = vcgeq_u32(vandq_u32(r, vdupq_n_u32(ABS_MASK)),
                                     vdupq_n_u32(HALF_BITS));
    const int32x4_t step = vorrq_s32(vshrq_n_s32(vreinterpretq_s32_u32(r), 31), vdupq_n_s32(1));
    return vaddq_s32(t, vandq_s32(vreinterpretq_s32_u32(big), step));
}
#endif

/* the bits of max|x| over one block (absmax_bits(x, BLK), the NEON build's inlined: its call,
 * loop and reduction were 72 instructions a block of the board's build) */
static inline uint32_t absmax_blk(const float *x)
{
#if TPH_NEON
    const uint32x4_t mask = vdupq_n_u32(ABS_MASK);
    uint32x4_t a = vmaxq_u32(vandq_u32(bits4(x), mask), vandq_u32(bits4(x + 4), mask));
    uint32x4_t b = vmaxq_u32(vandq_u32(bits4(x + 8), mask), vandq_u32(bits4(x + 12), mask));
    uint32x4_t c = vmaxq_u32(vandq_u32(bits4(x + 16), mask), vandq_u32(bits4(x + 20), mask));
    uint32x4_t e = vmaxq_u32(vandq_u32(bits4(x + 24), mask), vandq_u32(bits4(x + 28), mask));
    uint32x2_t h;
    a = vmaxq_u32(vmaxq_u32(a, b), vmaxq_u32(c, e));
    h = vpmax_u32(vget_low_u32(a), vget_high_u32(a));
    h = vpmax_u32(h, h);
    return vget_lane_u32(h, 0);
#else
    return absmax_bits(x, BLK);
#endif
}

/* one block: q = roundf(x * id) (|x id| <= 127 (1 + u)^3 < 127.5: no clamp); returns sum(q).
 * NEON flushes a subnormal x or a tiny product to zero where IEEE keeps it: with max|x| >=
 * 2^-118, |x id| < 2^-126 * 127 / 2^-118 (1 + 3u) < 0.5 for such an x, so its code is 0 either
 * way, as for a tiny product. */
static inline int32_t quant_block(const float *x, float id, int8_t *q)
{
    int32_t sum = 0;
    uint32_t j;
#if TPH_SSE2
    const __m128 s = _mm_set1_ps(id), half = _mm_set1_ps(0.5f), mhalf = _mm_set1_ps(-0.5f);
    __m128i t[8];
    for (j = 0; j < 8; j++) {
        const __m128 v = _mm_mul_ps(_mm_loadu_ps(x + 4 * j), s);
        __m128i i = _mm_cvttps_epi32(v);                        /* truncates */
        const __m128 r = _mm_sub_ps(v, _mm_cvtepi32_ps(i));     /* exact */
        i = _mm_sub_epi32(i, _mm_castps_si128(_mm_cmpge_ps(r, half)));
        t[j] = _mm_add_epi32(i, _mm_castps_si128(_mm_cmple_ps(r, mhalf)));
    }
    _mm_storeu_si128((__m128i *)q, _mm_packs_epi16(_mm_packs_epi32(t[0], t[1]),
                                                   _mm_packs_epi32(t[2], t[3])));
    _mm_storeu_si128((__m128i *)(q + 16), _mm_packs_epi16(_mm_packs_epi32(t[4], t[5]),
                                                          _mm_packs_epi32(t[6], t[7])));
    {
        int32_t l[4];
        __m128i a = _mm_add_epi32(_mm_add_epi32(_mm_add_epi32(t[0], t[1]),
                                                _mm_add_epi32(t[2], t[3])),
                                  _mm_add_epi32(_mm_add_epi32(t[4], t[5]),
                                                _mm_add_epi32(t[6], t[7])));
        _mm_storeu_si128((__m128i *)l, a);
        sum = l[0] + l[1] + l[2] + l[3];
    }
#elif TPH_NEON
    const float32x4_t s = vdupq_n_f32(id);
    int16x8_t h[4];
    int32x4_t p;
    for (j = 0; j < 4; j++)
        h[j] = vcombine_s16(vmovn_s32(round_away4(vmulq_f32(vld1q_f32(x + 8 * j), s))),
                            vmovn_s32(round_away4(vmulq_f32(vld1q_f32(x + 8 * j + 4), s))));
    vst1q_s8(q, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
    vst1q_s8(q + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
    /* the codes' sum: |lane| <= 4 * 127 in int16, then pairwise into int32 */
    p = vpaddlq_s16(vaddq_s16(vaddq_s16(h[0], h[1]), vaddq_s16(h[2], h[3])));
    sum = vgetq_lane_s32(p, 0) + vgetq_lane_s32(p, 1) + vgetq_lane_s32(p, 2)
          + vgetq_lane_s32(p, 3);
#else
    for (j = 0; j < BLK; j++)
        q[j] = (int8_t)round_away(x[j] * id);
    for (j = 0; j < BLK; j++)
        sum += q[j];
#endif
    return sum;
}

/* Q8_1 blocks of x, or Q8_0 ones when s is NULL (tph_quantise_q8_0): every block checked
 * first. The loop is here, in an exported function, so that the NEON build's objdump check
 * (tests/runtime/host/test_hostops.py NEON_KERNELS) finds its vector arithmetic by name. */
int32_t tph_quantise_q8_1(const float *x, uint32_t n, int8_t *q, uint16_t *d, uint16_t *s)
{
    uint32_t b, am[AMAX_KEPT];            /* the first AMAX_KEPT blocks' absmax, kept */
    if (n == 0 || n % BLK)
        return TPH_BADARG;
    for (b = 0; b < n / BLK; b++) {
        const uint32_t m = absmax_blk(x + b * BLK);
        if (m >= INF_BITS)
            return TPH_NONFINITE;
        if (m != 0 && m < BLK_AMAX_MIN_BITS)
            return TPH_TINY;
        if (b < AMAX_KEPT)
            am[b] = m;
    }
    for (b = 0; b < n / BLK; b++) {
        const float amax = u2f(b < AMAX_KEPT ? am[b] : absmax_blk(x + b * BLK));
        const float db = amax / 127.0f;                      /* normal or 0 (amax >= 2^-118) */
        const float id = db != 0.0f ? 1.0f / db : 0.0f;
        const int32_t sum = quant_block(x + b * BLK, id, q + b * BLK);
        d[b] = f32_to_f16(db);
        if (s)
            s[b] = f32_to_f16((float)sum * db);              /* |sum| <= 4064: exact */
    }
    return TPH_OK;
}

int32_t tph_quantise_q8_0(const float *x, uint32_t n, int8_t *q, uint16_t *d)
{
    return tph_quantise_q8_1(x, n, q, d, NULL);
}

#if TPH_SSE2
/* y[0..3] = ((float)acc * scale) * c: the scalar loop's two roundings, 4 lanes */
static inline void dequant4(const int32_t *acc, const float *scale, __m128 c, float *y)
{
    __m128 a = _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)acc));
    _mm_storeu_ps(y, mulz4(mulz4(a, fz4(_mm_loadu_ps(scale))), c));
}
#endif

#if TPH_NEON
static inline void dequant4(const int32_t *acc, const float *scale, float32x4_t c, float *y)
{
    vst1q_f32(y, vmulq_f32(vmulq_f32(vcvtq_f32_s32(vld1q_s32(acc)), vld1q_f32(scale)), c));
}
#endif

void tph_dequant_i32(const int32_t *acc, const float *scale, uint32_t n, float s, float *y)
{
    float inv = fz(1.0f / s);
    uint32_t i = 0;
    TPH_KEEP(inv);
#if TPH_SSE2 || TPH_NEON
    FTZ_ON
#if TPH_SSE2
    const __m128 c = _mm_set1_ps(inv);
#else
    const float32x4_t c = vdupq_n_f32(inv);
#endif
    for (; i < (n & ~15u); i += 16) {  /* 16 a pass: half the loop's instructions per result */
        dequant4(acc + i, scale + i, c, y + i);
        dequant4(acc + i + 4, scale + i + 4, c, y + i + 4);
        dequant4(acc + i + 8, scale + i + 8, c, y + i + 8);
        dequant4(acc + i + 12, scale + i + 12, c, y + i + 12);
    }
    for (; i < (n & ~3u); i += 4)
        dequant4(acc + i, scale + i, c, y + i);
    FTZ_OFF
#endif
    VFP_KEEP(inv);
    {
        VFZ_ON
        for (; i < n; i++)
            y[i] = MZ(MZ((float)acc[i], FZ(scale[i])), inv);
        VFZ_OFF
    }
}

/* y = (float)q * c (exact int8 -> float), NEON's multiply */
static void i8_mul(float *y, const int8_t *q, uint32_t n, float c)
{
    uint32_t i = 0;
    const uint32_t n16 = n & ~15u;
    c = fz(c);
    TPH_KEEP(c);
#if TPH_SSE2
    FTZ_ON
    const __m128 cv = _mm_set1_ps(c);
    for (; i < n16; i += 16) {
        __m128 f[4];
        i8x16_to_f32(q + i, f);
        _mm_storeu_ps(y + i, mulz4(f[0], cv));
        _mm_storeu_ps(y + i + 4, mulz4(f[1], cv));
        _mm_storeu_ps(y + i + 8, mulz4(f[2], cv));
        _mm_storeu_ps(y + i + 12, mulz4(f[3], cv));
    }
    FTZ_OFF
#elif TPH_NEON
    const float32x4_t cv = vdupq_n_f32(c);
    for (; i < n16; i += 16) {
        float32x4_t f[4];
        i8x16_to_f32(q + i, f);
        vst1q_f32(y + i, vmulq_f32(f[0], cv));
        vst1q_f32(y + i + 4, vmulq_f32(f[1], cv));
        vst1q_f32(y + i + 8, vmulq_f32(f[2], cv));
        vst1q_f32(y + i + 12, vmulq_f32(f[3], cv));
    }
#else
    (void)n16;
#endif
    VFP_KEEP(c);
    {
        VFZ_ON
        for (; i < n; i++)
            y[i] = MZ((float)q[i], c);
        VFZ_OFF
    }
}

/* y = v * c, 8 at a time */
static void mul_f32(const float *v, uint32_t n, float c, float *y)
{
    uint32_t i = 0;
    const uint32_t n8 = n & ~7u;
    c = fz(c);
    TPH_KEEP(c);
#if TPH_SSE2
    FTZ_ON
    const __m128 cv = _mm_set1_ps(c);
    for (; i < n8; i += 8) {
        _mm_storeu_ps(y + i, mulz4(fz4(_mm_loadu_ps(v + i)), cv));
        _mm_storeu_ps(y + i + 4, mulz4(fz4(_mm_loadu_ps(v + i + 4)), cv));
    }
    FTZ_OFF
#elif TPH_NEON
    const float32x4_t cv = vdupq_n_f32(c);
    for (; i < (n & ~15u); i += 16) {
        vst1q_f32(y + i, vmulq_f32(vld1q_f32(v + i), cv));
        vst1q_f32(y + i + 4, vmulq_f32(vld1q_f32(v + i + 4), cv));
        vst1q_f32(y + i + 8, vmulq_f32(vld1q_f32(v + i + 8), cv));
        vst1q_f32(y + i + 12, vmulq_f32(vld1q_f32(v + i + 12), cv));
    }
    for (; i < n8; i += 8) {
        vst1q_f32(y + i, vmulq_f32(vld1q_f32(v + i), cv));
        vst1q_f32(y + i + 4, vmulq_f32(vld1q_f32(v + i + 4), cv));
    }
#else
    (void)n8;
#endif
    VFP_KEEP(c);
    {
        VFZ_ON
        for (; i < n; i++)
            y[i] = MZ(FZ(v[i]), c);
        VFZ_OFF
    }
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
    const __m128 sc = fz4(_mm_loadu_ps(scale));
    const __m128i v0 = _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m128i v1 = _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm_storeu_ps(y0, mulz4(mulz4(_mm_cvtepi32_ps(v0), sc), c0));
    _mm_storeu_ps(y1, mulz4(mulz4(_mm_cvtepi32_ps(v1), sc), c1));
}

static inline void dequant2x4_f32(const float *v, __m128 c0, __m128 c1, float *y0, float *y1)
{
    const __m128 a = fz4(_mm_loadu_ps(v)), b = fz4(_mm_loadu_ps(v + 4));
    _mm_storeu_ps(y0, mulz4(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), c0));
    _mm_storeu_ps(y1, mulz4(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)), c1));
}
#define VEC_T __m128
#define VEC_DUP _mm_set1_ps
#endif

#if TPH_NEON
/* 4 rows of a 2-vector frame: vld2 splits by vector */
static inline void dequant2x4_i32(const int32_t *acc, const float *scale, float32x4_t c0,
                                  float32x4_t c1, float *y0, float *y1)
{
    const int32x4x2_t a = vld2q_s32(acc);
    const float32x4_t sc = vld1q_f32(scale);
    vst1q_f32(y0, vmulq_f32(vmulq_f32(vcvtq_f32_s32(a.val[0]), sc), c0));
    vst1q_f32(y1, vmulq_f32(vmulq_f32(vcvtq_f32_s32(a.val[1]), sc), c1));
}

static inline void dequant2x4_f32(const float *v, float32x4_t c0, float32x4_t c1, float *y0,
                                  float *y1)
{
    const float32x4x2_t a = vld2q_f32(v);
    vst1q_f32(y0, vmulq_f32(a.val[0], c0));
    vst1q_f32(y1, vmulq_f32(a.val[1], c1));
}
#define VEC_T float32x4_t
#define VEC_DUP vdupq_n_f32
#endif

void tph_dequant_b_i32(const int32_t *acc, const float *scale, uint32_t n, uint32_t B,
                       const float *s, float *const *y)
{
    float inv[256];
    uint32_t i = 0, j;
    for (j = 0; j < B && j < 256u; j++)
        inv[j] = fz(1.0f / s[j]);
#if TPH_SSE2 || TPH_NEON
    if (B == 2u) {               /* 8 rows a pass: half the loop's instructions per result */
        FTZ_ON
        const VEC_T c0 = VEC_DUP(inv[0]), c1 = VEC_DUP(inv[1]);
        float *y0 = y[0], *y1 = y[1];
        for (; i < (n & ~7u); i += 8) {
            dequant2x4_i32(acc + 2u * i, scale + i, c0, c1, y0 + i, y1 + i);
            dequant2x4_i32(acc + 2u * i + 8u, scale + i + 4u, c0, c1, y0 + i + 4u, y1 + i + 4u);
        }
        for (; i < (n & ~3u); i += 4)
            dequant2x4_i32(acc + 2u * i, scale + i, c0, c1, y0 + i, y1 + i);
        FTZ_OFF
    }
#endif
    {
        VFZ_ON
        if (B == 2u) {           /* the portable body (the VFP-only build): a row a pass */
            float *y0 = y[0], *y1 = y[1];
            const float i0 = inv[0], i1 = inv[1];
            for (; i < n; i++) {
                const float sc = FZ(scale[i]);
                y0[i] = MZ(MZ((float)acc[2u * i], sc), i0);
                y1[i] = MZ(MZ((float)acc[2u * i + 1u], sc), i1);
            }
        }
        for (; i < n; i++)
            for (j = 0; j < B; j++)
                y[j][i] = MZ(MZ((float)acc[i * B + j], FZ(scale[i])), inv[j]);
        VFZ_OFF
    }
}

void tph_dequant_b_f32(const float *v, uint32_t n, uint32_t B, const float *s, float *const *y)
{
    float inv[256];
    uint32_t i = 0, j;
    for (j = 0; j < B && j < 256u; j++)
        inv[j] = fz(1.0f / s[j]);
#if TPH_SSE2 || TPH_NEON
    if (B == 2u) {
        FTZ_ON
        const VEC_T c0 = VEC_DUP(inv[0]), c1 = VEC_DUP(inv[1]);
        float *y0 = y[0], *y1 = y[1];
        for (; i < (n & ~7u); i += 8) {
            dequant2x4_f32(v + 2u * i, c0, c1, y0 + i, y1 + i);
            dequant2x4_f32(v + 2u * i + 8u, c0, c1, y0 + i + 4u, y1 + i + 4u);
        }
        for (; i < (n & ~3u); i += 4)
            dequant2x4_f32(v + 2u * i, c0, c1, y0 + i, y1 + i);
        FTZ_OFF
    }
#endif
    {
        VFZ_ON
        if (B == 2u) {
            float *y0 = y[0], *y1 = y[1];
            const float i0 = inv[0], i1 = inv[1];
            for (; i < n; i++) {
                y0[i] = MZ(FZ(v[2u * i]), i0);
                y1[i] = MZ(FZ(v[2u * i + 1u]), i1);
            }
        }
        for (; i < n; i++)
            for (j = 0; j < B; j++)
                y[j][i] = MZ(FZ(v[i * B + j]), inv[j]);
        VFZ_OFF
    }
}

int32_t tph_kv_requantise(int8_t *q, uint32_t n, float ratio)
{
    uint32_t i = 0;
    if (!(ratio > 0.0f && ratio <= KV_RATIO_MAX))
        return TPH_BADARG;   /* kv_step's ratios only: then |q ratio| < 127.5 (above) */
#if TPH_NEON
    {   /* 16 a pass, in registers */
        const float32x4_t r = vdupq_n_f32(ratio);
        for (; i < (n & ~15u); i += 16) {
            float32x4_t f[4];
            i8x16_to_f32(q + i, f);
            store16(q + i, scaled4(f[0], r, 0), scaled4(f[1], r, 0), scaled4(f[2], r, 0),
                    scaled4(f[3], r, 0));
        }
    }
#endif
    {
        float buf[256];      /* 256 at a time through floats ((float)q * 1 is exact) */
        uint32_t m;
        for (; i < n; i += m) {
            m = n - i < 256 ? n - i : 256;
            i8_mul(buf, q + i, m, 1.0f);
            quantise(buf, m, ratio, q + i, 0);
        }
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

/* x * inv in IEEE float32 (the numpy twin's plain multiply), clamped, then rounded half to
 * even by the magic number (|v| <= 32767 < 2^22); a scalar loop: 6 rows of d a layer */
void tph_kv_row16(const float *x, uint32_t d, float step, int16_t *q)
{
    uint32_t i;
    if (step > 0.0f) {
        const float inv = 1.0f / step;
        for (i = 0; i < d; i++) {
            const float v = x[i] * inv;
            q[i] = (int16_t)rint_small(v < -32767.0f ? -32767.0f : v > 32767.0f ? 32767.0f : v);
        }
    } else
        memset(q, 0, (size_t)d * sizeof *q);
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

/* x as two vectors of blocks, the high part and the residual (docs/activations.md section 7) */
int32_t tph_quantise_parts(const float *x, uint32_t n, int8_t *q0, uint16_t *d0, uint16_t *s0,
                           int8_t *q1, uint16_t *d1, uint16_t *s1)
{
    float r[BLK];
    uint32_t b, i;
    int32_t rc;
    if ((rc = tph_quantise_q8_1(x, n, q0, d0, s0)))
        return rc;
    for (b = 0; b < n / BLK; b++) {
        const float d = f16_to_f32(d0[b]);
        const float *xb = x + b * BLK;
        const int8_t *qb = q0 + b * BLK;
#if TPH_NEON
        /* the same operations 4 lanes at a time: d * q is exact and normal (or 0), so NEON's
         * flush acts only on a subnormal x or r, whose code is 0 either way (section 7 of
         * docs/activations.md, as quant_block) */
        {
            const float32x4_t dv = vdupq_n_f32(d);
            for (i = 0; i < BLK; i += 8) {
                const int16x8_t q16 = vmovl_s8(vld1_s8(qb + i));
                const float32x4_t q0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(q16)));
                const float32x4_t q1 = vcvtq_f32_s32(vmovl_s16(vget_high_s16(q16)));
                vst1q_f32(r + i, vsubq_f32(vld1q_f32(xb + i), vmulq_f32(dv, q0)));
                vst1q_f32(r + i + 4, vsubq_f32(vld1q_f32(xb + i + 4), vmulq_f32(dv, q1)));
            }
        }
#else
        for (i = 0; i < BLK; i++)                /* d * q exact; one rounding, the subtraction */
            r[i] = xb[i] - d * (float)qb[i];
#endif
        if (absmax_blk(r) < BLK_AMAX_MIN_BITS)   /* 0 <= max|r| < 2^-118: zeros (below the
                                                    quantiser's domain) */
            memset(r, 0, sizeof r);
        if ((rc = tph_quantise_q8_1(r, BLK, q1 + b * BLK, d1 + b, s1 ? s1 + b : NULL)))
            return rc;
    }
    return TPH_OK;
}
