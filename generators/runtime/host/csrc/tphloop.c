/* tphloop: the decoder's per-token step (tphloop.h; the Python twin is Decoder.step on
 * DmaRuntime in generators/runtime/decode/decoder.py and backends.py).
 *
 * Register and DMA memory ordering. The descriptors, x slots and part slots live in DMA memory
 * the CPU maps uncached (the plan's frames and kv regions); the DMA reads them after a
 * TAILDESC write and writes STATUS words and results before DMASR says Idle. TPH_WMB before
 * the TAILDESC writes makes every store of the CPU visible to the DMA first (ARMv7: DSB ST, as
 * Linux's wmb()); TPH_RMB after the polls orders the reads of STATUS words and results after
 * the DMASR reads that saw completion (ARMv7: DSB, as rmb()). STATUS words are read through
 * volatile pointers (the DMA writes them while the CPU polls). On x86 (the register models
 * only) both are compiler barriers.
 *
 * The result slots live in the results region, which the CPU maps cached and never writes
 * (its lines are never dirty): after a transfer's completion is seen (the polls, TPH_RMB) and
 * before its words are read, received() calls io->sync over exactly the lines of the words an
 * S2MM descriptor received (its STATUS byte count rounded up to whole 32-byte lines; a slot
 * starts on a line and owns the lines it touches), which invalidates them in L1 and the PL310
 * (on the board XRT's xclSyncBO from the device: the kernel's dma_sync_single_for_cpu). A line
 * the CPU held from an earlier layer's read of the same slot, or fetched speculatively while
 * the DMA wrote, is thereby dropped and read again from DDR.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L   /* clock_gettime */
#endif

#include "tphloop.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "tphost.h"
#include "tphwork.h"
#include "tphfacts.h"

#if defined(__ARM_NEON) && !defined(TPH_PORTABLE)
#define TPH_LOOP_NEON 1
#include <arm_neon.h>
#else
#define TPH_LOOP_NEON 0
#endif


#if defined(__arm__)
#define TPH_WMB() __asm__ __volatile__("dsb st" ::: "memory")
#define TPH_RMB() __asm__ __volatile__("dsb sy" ::: "memory")
#else
#define TPH_WMB() __asm__ __volatile__("" ::: "memory")
#define TPH_RMB() __asm__ __volatile__("" ::: "memory")
#endif

/* a job function inlined where the one-row step calls it directly (its stage a constant
 * there: the one-token step runs the code it ran before the worker), and out of line for the
 * worker's function pointer */
#define INLINE inline __attribute__((always_inline))

#define KIND_XSLOT(k) ((k) == TPH_QKV ? 0u : (k) == TPH_O ? 1u : (k) == TPH_GU ? 2u \
                       : (k) == TPH_DOWN ? 3u : 4u)

typedef struct ctx {
    const uint32_t *t;          /* the table */
    void *const *p;             /* the pointer slots */
    const tph_io *io;
    uint32_t layers, hidden, mlp, heads, kvh, d, vocab, group, kvdim, context, kv_row;
    uint32_t vectors, streams, stream_bytes, nx;
    float eps;
    /* the step's vectors (the context's own memory; x .. h: VECTORS rows each) */
    float *x, *n, *q, *k, *v, *att, *o, *g, *u, *h, *cosf, *sinf, *sq, *sx;
    uint32_t *mult, *shift;
    uint8_t *block;             /* an attention frame's header block and q */
    int8_t *row;                /* one quantised K or V row */
    void *work;                 /* the worker (tphwork.h), 64-byte aligned in the context */
} ctx_t;

int32_t tph_loop_abi(void) { return TPH_LOOP_ABI; }

void tph_wmb(void) { TPH_WMB(); }

/* ------------------------------------------------------------------ table access */

static inline const uint32_t *xfer(const ctx_t *c, uint32_t ti)
{
    return c->t + c->t[c->t[TPH_T_XFER_OFF] + ti];
}

static inline const uint32_t *x_frames(const uint32_t *X) { return X + TPH_X_FIXED; }

static inline const uint32_t *x_desc(const uint32_t *X)
{
    return x_frames(X) + X[TPH_X_FRAMES] * TPH_FRAME_WORDS;
}

static inline const uint32_t *x_tails(const uint32_t *X)
{
    return x_desc(X) + X[TPH_X_DESC] * TPH_DESC_WORDS;
}

static inline const uint32_t *x_outs(const uint32_t *X)
{
    return x_tails(X) + X[TPH_X_TAILS] * TPH_TAIL_WORDS;
}

static inline uint32_t x_words(const uint32_t *X)
{
    return TPH_X_FIXED + X[TPH_X_FRAMES] * TPH_FRAME_WORDS + X[TPH_X_DESC] * TPH_DESC_WORDS
           + X[TPH_X_TAILS] * TPH_TAIL_WORDS + X[TPH_X_OUTS] * TPH_OUT_WORDS;
}

static inline uint32_t kind_xfer(const ctx_t *c, uint32_t layer, uint32_t kind)
{
    uint32_t i = layer == TPH_NONE ? c->layers * 5u : layer * 5u + kind;
    return c->t[c->t[TPH_T_KIND_OFF] + i];
}

static inline volatile uint32_t *fwords(const ctx_t *c)
{
    return (volatile uint32_t *)c->p[TPH_P_FRAMES];
}

static inline uint8_t *fbytes(const ctx_t *c) { return (uint8_t *)c->p[TPH_P_FRAMES]; }
static inline const uint8_t *rbytes(const ctx_t *c)
{
    return (const uint8_t *)c->p[TPH_P_RESULTS];
}
static inline uint32_t *stats(const ctx_t *c) { return (uint32_t *)c->p[TPH_P_STATS]; }
static inline int32_t *state(const ctx_t *c) { return (int32_t *)c->p[TPH_P_STATE]; }
static inline uint32_t *errw(const ctx_t *c) { return (uint32_t *)c->p[TPH_P_ERR]; }

static inline uint32_t chan_base(uint32_t ch) { return ch & 1u ? TPH_S2MM : 0u; }

/* the shared per-transfer state (DmaRuntime._vec, _kv_stream, _again) */
static inline int32_t *xs_vec(const ctx_t *c) { return (int32_t *)c->p[TPH_P_XSTATE]; }
static inline int32_t *xs_stream(const ctx_t *c) { return xs_vec(c) + c->nx; }
static inline int32_t *xs_again(const ctx_t *c) { return xs_vec(c) + 2u * c->nx; }

/* ------------------------------------------------------------------ records */

static int32_t record(uint32_t *rec, int32_t code, uint32_t transfer, uint32_t ch, uint32_t sr,
                      uint32_t a, uint32_t b, uint32_t c_, uint32_t d)
{
    memset(rec, 0, TPH_REC_WORDS * sizeof *rec);
    rec[0] = (uint32_t)code;
    rec[1] = transfer;
    rec[2] = ch;
    rec[3] = sr;
    rec[4] = a;
    rec[5] = b;
    rec[6] = c_;
    rec[7] = d;
    return code;
}

static int32_t fail(const ctx_t *c, int32_t code, uint32_t transfer, uint32_t ch, uint32_t sr,
                    uint32_t a, uint32_t b, uint32_t c_, uint32_t d)
{
    return record(errw(c), code, transfer, ch, sr, a, b, c_, d);
}

static int32_t value_error(const ctx_t *c, uint32_t op, int32_t rc, double score)
{
    uint64_t bits = 0;
    if (op == TPH_V_SCORE)
        memcpy(&bits, &score, sizeof bits);
    return fail(c, TPH_E_VALUE, TPH_NONE, 0, 0, op, (uint32_t)rc, (uint32_t)bits,
                (uint32_t)(bits >> 32));
}

/* ------------------------------------------------------------------ registers */

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline int32_t reg_read(const ctx_t *c, uint32_t dma, uint32_t off, uint32_t *v)
{
    stats(c)[TPH_C_READS0 + dma]++;
    if (c->io->regs[dma]) {
        *v = c->io->regs[dma][off / 4u];
        return TPH_OK;
    }
    if (c->io->read(c->io->ctx, dma, off, v))
        return fail(c, TPH_E_IO, TPH_NONE, dma * 2u, 0, 0, 0, 0, 0);
    return TPH_OK;
}

static inline int32_t reg_write(const ctx_t *c, uint32_t dma, uint32_t off, uint32_t v)
{
    stats(c)[TPH_C_WRITES0 + dma]++;
    if (c->io->regs[dma]) {
        c->io->regs[dma][off / 4u] = v;
        return TPH_OK;
    }
    if (c->io->write(c->io->ctx, dma, off, v))
        return fail(c, TPH_E_IO, TPH_NONE, dma * 2u, 0, 0, 0, 0, 0);
    return TPH_OK;
}

/* sgdma.SgDma.reset of both DMAs, the PL reset, then every channel started at its chain's
 * next transfer (DmaRuntime._reset) */
static int32_t reset_all(const ctx_t *c)
{
    uint32_t dma, ch, a, b, sr;
    int32_t rc;
    const uint32_t limit = (uint32_t)state(c)[TPH_S_RESET_TIMEOUT_US];
    for (dma = 0; dma < 2; dma++) {
        uint64_t deadline = 0;
        if ((rc = reg_write(c, dma, TPH_DMACR, TPH_CR_RESET)))
            return rc;
        for (;;) {
            if ((rc = reg_read(c, dma, TPH_DMACR, &a))
                || (rc = reg_read(c, dma, TPH_S2MM + TPH_DMACR, &b)))
                return rc;
            if (!((a | b) & TPH_CR_RESET))
                break;
            if (!deadline)
                deadline = now_us() + limit;
            else if (now_us() > deadline)
                return fail(c, TPH_E_RESET, TPH_NONE, dma * 2u, a | b, 1, 0, 0, 0);
        }
    }
    if (c->io->pl_reset && c->io->pl_reset(c->io->ctx))
        return fail(c, TPH_E_IO, TPH_NONE, 0, 0, 0, 0, 0, 0);
    for (ch = 0; ch < 4; ch++) {
        uint32_t base = chan_base(ch), ti = (uint32_t)state(c)[TPH_S_NEXT + ch];
        uint64_t deadline = 0;
        dma = ch / 2u;
        if ((rc = reg_write(c, dma, base + TPH_CURDESC, xfer(c, ti)[TPH_X_FIRST + ch]))
            || (rc = reg_write(c, dma, base + TPH_DMACR, TPH_CR_RS)))
            return rc;
        for (;;) {
            if ((rc = reg_read(c, dma, base + TPH_DMASR, &sr)))
                return rc;
            if (!(sr & TPH_SR_HALTED))
                break;
            if (!deadline)
                deadline = now_us() + limit;
            else if (now_us() > deadline)
                return fail(c, TPH_E_RESET, TPH_NONE, ch, sr, 2, 0, 0, 0);
        }
    }
    return TPH_OK;
}

/* ------------------------------------------------------------------ one transfer */

/* DmaRuntime._attempt: clear the STATUS words, TAILDESC per channel (S2MM first), poll, check
 * every descriptor (the first with an error bit or not complete; else the first MM2S one
 * short of its length; else the first S2MM one without RXEOF). TPH_OK, a TPH_E_DMA_* fault
 * (in rec) or TPH_E_IO. */
static int32_t attempt(const ctx_t *c, uint32_t ti, uint32_t *rec)
{
    const uint32_t *X = xfer(c, ti), *B = x_desc(X), *T = x_tails(X);
    const uint32_t nb = X[TPH_X_DESC], nt = X[TPH_X_TAILS], dw = TPH_DESC_BYTES / 4u;
    volatile uint32_t *fw = fwords(c);
    uint32_t i, k, s, nd = 0, sr[4] = {0, 0, 0, 0}, pending = (1u << nt) - 1u;
    uint32_t short_ch = TPH_NONE, short_got = 0, short_want = 0, over_ch = TPH_NONE;
    uint64_t deadline = 0;
    int32_t rc;
    for (k = 0; k < nb; k++) {            /* (locals: a store may alias the table) */
        volatile uint32_t *st = fw + B[k * TPH_DESC_WORDS + 1];
        const uint32_t n = B[k * TPH_DESC_WORDS + 2];
        for (i = 0; i < n; i++, st += dw)
            *st = 0;
        nd += n;
    }
    stats(c)[TPH_C_DESC] += 4u * nd;
    TPH_WMB();
    for (i = 0; i < nt; i++) {
        uint32_t ch = T[i * TPH_TAIL_WORDS];
        if ((rc = reg_write(c, ch / 2u, chan_base(ch) + TPH_TAILDESC, T[i * TPH_TAIL_WORDS + 1])))
            return rc;
    }
    stats(c)[TPH_C_TAILS] += nt;
    while (pending) {
        for (i = 0; i < nt; i++) {
            uint32_t ch = T[i * TPH_TAIL_WORDS];
            if (!(pending & (1u << i)))
                continue;
            if ((rc = reg_read(c, ch / 2u, chan_base(ch) + TPH_DMASR, &s)))
                return rc;
            sr[ch] = s;
            if (s & TPH_SR_ERRORS)
                return record(rec, TPH_E_DMA_ERRBIT, ti, ch, s, 0, 0, 0, 0);
            if (s & TPH_SR_HALTED)
                return record(rec, TPH_E_DMA_HALTED, ti, ch, s, 0, 0, 0, 0);
            if ((s & TPH_SR_IDLE) && (fw[T[i * TPH_TAIL_WORDS + 2]] & TPH_ST_CMPLT))
                pending &= ~(1u << i);
        }
        if (!pending)
            break;
        if (!deadline) {
            deadline = now_us() + (uint32_t)state(c)[TPH_S_TIMEOUT_US];
        } else if (now_us() > deadline) {
            uint32_t first = TPH_NONE, others = 0;
            for (i = 0; i < nt; i++) {
                uint32_t ch = T[i * TPH_TAIL_WORDS];
                if (!(pending & (1u << i)))
                    continue;
                if (first == TPH_NONE) {
                    first = ch;
                } else {
                    rec[5 + 2 * others] = ch;
                    rec[6 + 2 * others] = sr[ch];
                    others++;
                }
            }
            rec[0] = TPH_E_DMA_HANG;
            rec[1] = ti;
            rec[2] = first;
            rec[3] = sr[first];
            rec[4] = others;
            for (i = 5 + 2 * others; i < TPH_REC_WORDS; i++)
                rec[i] = 0;
            return TPH_E_DMA_HANG;
        }
    }
    TPH_RMB();
    {                                   /* the common case first: every descriptor good */
        uint32_t anomaly = 0, reads = nd;
        for (k = 0; k < nb; k++) {
            const uint32_t n = B[k * TPH_DESC_WORDS + 2];
            volatile uint32_t *desc = fw + B[k * TPH_DESC_WORDS + 1] - TPH_D_STATUS;
            if (B[k * TPH_DESC_WORDS] & 1u) {
                for (i = 0; i < n; i++, desc += dw)
                    anomaly |= (desc[TPH_D_STATUS] & (TPH_ST_CMPLT | TPH_ST_ERRORS | TPH_ST_RXEOF))
                               ^ (TPH_ST_CMPLT | TPH_ST_RXEOF);
            } else {
                reads += n;
                for (i = 0; i < n; i++, desc += dw) {
                    s = desc[TPH_D_STATUS];
                    anomaly |= ((s & (TPH_ST_CMPLT | TPH_ST_ERRORS)) ^ TPH_ST_CMPLT)
                               | ((s ^ desc[TPH_D_CONTROL]) & TPH_LEN_MASK);
                }
            }
        }
        stats(c)[TPH_C_READ] += 4u * reads;
        if (!anomaly)
            return TPH_OK;
    }
    for (k = 0; k < nb; k++) {          /* which one, in the Python loop's order */
        const uint32_t ch = B[k * TPH_DESC_WORDS], n = B[k * TPH_DESC_WORDS + 2];
        volatile uint32_t *desc = fw + B[k * TPH_DESC_WORDS + 1] - TPH_D_STATUS;
        for (i = 0; i < n; i++, desc += dw) {
            s = desc[TPH_D_STATUS];
            if ((s & (TPH_ST_CMPLT | TPH_ST_ERRORS)) != TPH_ST_CMPLT)
                return record(rec, TPH_E_DMA_DESC, ti, ch, sr[ch], s, 0, 0, 0);
            if (!(ch & 1u)) {             /* MM2S: the whole length (its CONTROL word) */
                uint32_t want = desc[TPH_D_CONTROL] & TPH_LEN_MASK;
                if ((s & TPH_LEN_MASK) != want && short_ch == TPH_NONE) {
                    short_ch = ch;
                    short_got = s & TPH_LEN_MASK;
                    short_want = want;
                }
            } else if (!(s & TPH_ST_RXEOF) && over_ch == TPH_NONE) {
                over_ch = ch;             /* S2MM: an output frame longer than its slot */
            }
        }
    }
    if (short_ch != TPH_NONE)
        return record(rec, TPH_E_DMA_SHORT, ti, short_ch, sr[short_ch], short_got, short_want,
                      0, 0);
    if (over_ch != TPH_NONE)
        return record(rec, TPH_E_DMA_OVER, ti, over_ch, sr[over_ch], 0, 0, 0, 0);
    return TPH_OK;
}

static int is_dma_fault(int32_t rc) { return rc >= TPH_E_DMA_ERRBIT && rc <= TPH_E_DMA_OVER; }

/* DmaRuntime.run: the chain's order checked, the attempt, on a fault a reset and a second
 * attempt; the channels' next transfers */
static int32_t run(const ctx_t *c, uint32_t ti)
{
    const uint32_t *X = xfer(c, ti), *T = x_tails(X);
    const uint32_t nt = X[TPH_X_TAILS];
    int32_t *s = state(c);
    uint32_t *err = errw(c), i;
    int32_t rc;
    for (i = 0; i < nt; i++) {
        uint32_t ch = T[i * TPH_TAIL_WORDS];
        if ((uint32_t)s[TPH_S_NEXT + ch] != ti)
            return fail(c, TPH_E_ORDER, ti, ch, 0, (uint32_t)s[TPH_S_NEXT + ch], 0, 0, 0);
    }
    if (c->io->hook && c->io->hook(c->io->ctx, ti, 0))
        return fail(c, TPH_E_IO, ti, 0, 0, 0, 0, 0, 0);
    rc = attempt(c, ti, err);
    if (is_dma_fault(rc)) {
        uint32_t k = err[TPH_ERR_NRETRIED];
        if (k < TPH_ERR_RETRIED)
            memcpy(err + TPH_ERR_REC + k * TPH_REC_WORDS, err, TPH_REC_WORDS * sizeof *err);
        err[TPH_ERR_NRETRIED] = k + 1;
        stats(c)[TPH_C_RETRIES]++;
        if ((rc = reset_all(c)))
            return rc;
        rc = attempt(c, ti, err);
    }
    if (rc)
        return rc;
    if (c->io->hook && c->io->hook(c->io->ctx, ti, 1))
        return fail(c, TPH_E_IO, ti, 0, 0, 0, 0, 0, 0);
    {   /* a batched step's attention block run again: the same transfer next */
        const uint32_t next = xs_again(c)[ti] ? TPH_NONE
                              : s[TPH_S_LINK] == 1 ? TPH_X_NEXT_LOGITS : TPH_X_NEXT_BODY;
        for (i = 0; i < nt; i++) {
            uint32_t ch = T[i * TPH_TAIL_WORDS];
            s[TPH_S_NEXT + ch] = next == TPH_NONE ? (int32_t)ti : (int32_t)X[next + ch];
        }
    }
    stats(c)[TPH_C_TRANSFERS]++;
    return TPH_OK;
}

/* the words an S2MM descriptor received into its slot (*w, *n of them; the trace copies
 * them), their lines invalidated first; TPH_OK or TPH_E_SYNC */
static int32_t received(const ctx_t *c, const uint32_t *out, uint32_t *n, uint32_t trow,
                        const uint32_t **w)
{
    uint32_t *trace = (uint32_t *)c->p[TPH_P_TRACE], *trace_n = (uint32_t *)c->p[TPH_P_TRACE_N];
    /* the bytes received, at most the slot (a DMA never writes past its descriptor's
     * length; tph_init checked the descriptor's length against the region) */
    uint32_t cap = (fwords(c)[out[2] - TPH_D_STATUS + TPH_D_CONTROL] & TPH_LEN_MASK) >> 2;
    *w = (const uint32_t *)rbytes(c) + out[3];
    *n = (fwords(c)[out[2]] & TPH_LEN_MASK) >> 2;
    *n = *n < cap ? *n : cap;
    if (*n) {
        const uint32_t bytes = (4u * *n + TPH_LINE - 1u) & ~(TPH_LINE - 1u);
        const tph_io *io = c->io;
        int32_t rc = io->sync(io->sync_handle, io->sync_bo, TPH_SYNC_FROM_DEVICE, bytes,
                              (size_t)io->sync_offset + 4u * out[3]);
        if (rc)
            return fail(c, TPH_E_SYNC, TPH_NONE, out[0], out[1], 4u * out[3], bytes,
                        (uint32_t)rc, 0);
        stats(c)[TPH_C_INVALIDATES]++;
        stats(c)[TPH_C_INVALIDATED] += bytes;
    }
    stats(c)[TPH_C_READ] += 4u * *n;
    stats(c)[TPH_C_READ_CACHED] += 4u * *n;
    if (trace && trace_n) {
        memcpy(trace + trow * c->t[TPH_T_TRACE_WORDS] + out[4], *w, *n * sizeof **w);
        trace_n[trow * c->t[TPH_T_TRACE_OUTS] + out[5]] = *n;
    }
    return TPH_OK;
}

/* ------------------------------------------------------------------ the step's parts */

/* DmaRuntime.set_vectors: the next transfer ti sends B-vector frames (B = 1: the image's):
 * per matrix half its header descriptor at the B-vector header (or the image's), its x
 * descriptor at the vectors word and B vectors (or vector 0 alone) */
static void set_vectors(const ctx_t *c, uint32_t ti, uint32_t B)
{
    const uint32_t off = c->t[c->t[TPH_T_VEC_OFF] + ti];
    volatile uint32_t *fw = fwords(c);
    int32_t *vec = xs_vec(c);
    const uint32_t *M;
    uint32_t i, n;
    if ((uint32_t)vec[ti] == B || !off)
        return;
    n = c->t[off];
    M = c->t + off + 1u;
    for (i = 0; i < n; i++, M += TPH_VEC_WORDS) {
        const uint32_t hw = M[0], xw = M[1];
        const uint32_t len = B == 1u ? M[5] : 8u + B * M[5];
        fw[hw + TPH_D_BUFFER] = B == 1u ? M[2] : M[3];
        fw[xw + TPH_D_BUFFER] = B == 1u ? M[4] : M[4] - 8u;
        fw[xw + TPH_D_CONTROL] = (fw[xw + TPH_D_CONTROL] & ~TPH_LEN_MASK) | len;
    }
    stats(c)[TPH_C_DESC] += 12u * n;
    vec[ti] = (int32_t)B;
}

/* DmaRuntime.set_attention: before one of a batched step's attention transfers of a layer,
 * its K/V segments read stream's cache, L positions; again: another one of this layer follows
 * (each channel's block links back to itself), else the chain goes on to o */
static void set_attention(const ctx_t *c, uint32_t ti, uint32_t stream, uint32_t L,
                          uint32_t again)
{
    const uint32_t *A = c->t + c->t[c->t[TPH_T_ATTX_OFF] + ti];
    const uint32_t nctrl = A[0], *ctrl = A + 1, nkv = A[1u + nctrl], *kvb = A + 2u + nctrl;
    const uint32_t nlink = kvb[2u * nkv], *link = kvb + 2u * nkv + 1u, n = L * c->kv_row;
    volatile uint32_t *fw = fwords(c);
    uint32_t i;
    for (i = 0; i < nctrl; i++)
        fw[ctrl[i] & 0x7FFFFFFFu] = n | (ctrl[i] >> 31 ? TPH_CTRL_EOF : 0u);
    if ((uint32_t)xs_stream(c)[ti] != stream) {
        for (i = 0; i < nkv; i++)
            fw[kvb[2u * i]] = kvb[2u * i + 1u] + stream * c->stream_bytes;
        xs_stream(c)[ti] = (int32_t)stream;
        stats(c)[TPH_C_DESC] += 4u * nkv;
    }
    if ((uint32_t)xs_again(c)[ti] != again) {
        for (i = 0; i < nlink; i++)
            fw[link[4u * i + 1u]] = again ? link[4u * i + 3u] : link[4u * i + 2u];
        xs_again(c)[ti] = (int32_t)again;
        stats(c)[TPH_C_DESC] += 4u * nlink;
    }
    stats(c)[TPH_C_DESC] += 4u * nctrl;
    state(c)[TPH_S_L] = (int32_t)L;
}

/* DmaRuntime.restore_chains: every transfer back to one-vector frames, every attention
 * transfer on stream 0's cache and the ring's links */
static void restore_chains(const ctx_t *c)
{
    uint32_t ti, i;
    volatile uint32_t *fw = fwords(c);
    for (ti = 0; ti < c->nx; ti++) {
        const uint32_t aoff = c->t[c->t[TPH_T_ATTX_OFF] + ti];
        if (aoff) {
            const uint32_t *A = c->t + aoff, nctrl = A[0], nkv = A[1u + nctrl];
            const uint32_t *kvb = A + 2u + nctrl, nlink = kvb[2u * nkv];
            const uint32_t *link = kvb + 2u * nkv + 1u;
            if (xs_stream(c)[ti] || xs_again(c)[ti]) {
                for (i = 0; i < nkv; i++)
                    fw[kvb[2u * i]] = kvb[2u * i + 1u];
                for (i = 0; i < nlink; i++)
                    fw[link[4u * i + 1u]] = link[4u * i + 2u];
                xs_stream(c)[ti] = xs_again(c)[ti] = 0;
            }
        } else if (xs_vec(c)[ti] != 1) {
            set_vectors(c, ti, 1u);
        }
    }
}

static int32_t matrix_fail(const ctx_t *c, uint32_t ti, uint32_t f, uint32_t p, uint32_t what,
                           uint32_t st, uint32_t n, uint32_t rows, uint32_t B)
{
    int32_t rc = fail(c, TPH_E_MATRIX, ti, f, p, what, st, n, rows);
    errw(c)[8] = B;
    return rc;
}

/* one port's results of frame fr (w: its words) dequantised into out[j] + the port's first
 * row, j < B (B = 1: dequant_f32 / dequant_i32; B > 1: row r's B results together) */
/* (INLINE: a one-vector frame's ports cost what the two calls cost before the worker) */
/* a B-vector frame's value words (row r's B words at w[r * B], one per vector) into the B
 * vectors' outputs (out[j][first + r]); B = 2 (the PYNQ-Z1 top's vectors) on NEON by VLD2, 8
 * words a step: the word-by-word loop was about 5 instructions a word on the board's build
 * (make a9-model: 1.0 M of a Q4_1 2-row pass's 3.2 M per row) */
static void split_words(const uint32_t *w, uint32_t rows, uint32_t B, float *const *out,
                        uint32_t first)
{
    uint32_t j, r = 0;
#if TPH_LOOP_NEON
    if (B == 2u) {
        float *y0 = out[0] + first, *y1 = out[1] + first;
        for (; r + 4u <= rows; r += 4u) {
            const float32x4x2_t v = vld2q_f32((const float *)(const void *)(w + 2u * r));
            vst1q_f32(y0 + r, v.val[0]);
            vst1q_f32(y1 + r, v.val[1]);
        }
    }
#endif
    for (j = 0; j < B; j++) {
        float *yj = out[j] + first;
        uint32_t i;
        for (i = r; i < rows; i++)
            memcpy(yj + i, w + i * B + j, sizeof(float));
    }
}

/* a frame of x in two parts (TPH_T_X_PARTS 2): row r's 2B words at w[2 B r], vector j's
 * value the sum of words 2j and 2j + 1 (x's blocks', its residual's), into out[j][first + r] */
static void sum_parts(const uint32_t *w, uint32_t rows, uint32_t B, float *const *out,
                      uint32_t first)
{
    uint32_t j, r, r0 = 0;
#if TPH_LOOP_NEON
    /* B = 1 (the one-token step): VLD2 splits 4 rows' word pairs, one add; every nonzero word
     * is a normal float32 of at least 2^-48 in magnitude, so a nonzero sum is at least 2^-71:
     * NEON's flush never acts and the sum is IEEE's */
    if (B == 1u) {
        float *y0 = out[0] + first;
        for (; r0 + 4u <= rows; r0 += 4u) {
            const float32x4x2_t v = vld2q_f32((const float *)(const void *)(w + 2u * r0));
            vst1q_f32(y0 + r0, vaddq_f32(v.val[0], v.val[1]));
        }
    }
#endif
    for (j = 0; j < B; j++) {
        float *yj = out[j] + first;
        for (r = B == 1u ? r0 : 0u; r < rows; r++) {
            float a, b;
            memcpy(&a, w + (r * B + j) * 2u, sizeof a);
            memcpy(&b, w + (r * B + j) * 2u + 1u, sizeof b);
            yj[r] = a + b;
        }
    }
}

static INLINE void dequant_port(const ctx_t *c, const uint32_t *fr, const uint32_t *w, uint32_t p,
                         uint32_t B, uint32_t parts, float *const *out)
{
    const float *scales = (const float *)c->p[TPH_P_SCALES] + fr[4];
    const uint32_t rows = fr[2 + p], first = p ? fr[2] : 0u;
    float *y[TPH_MAX_VECTORS];
    uint32_t j;
    if (fr[1] >= TPH_RES_VALUE) {         /* 0x05, 0x09: each word the row's whole value */
        if (parts == 2u) {
            sum_parts(w, rows, B, out, first);
            return;
        }
        if (B == 1u) {
            memcpy(out[0] + first, w, rows * sizeof(float));
            return;
        }
        split_words(w, rows, B, out, first);
        return;
    }
    if (B == 1u) {
        if (fr[1])                        /* Q4_1 rows: float32 sums */
            tph_dequant_f32((const float *)w, rows, c->sx[0], out[0] + first);
        else                              /* INT8 / ternary rows: int32 sums, a scale per row */
            tph_dequant_i32((const int32_t *)w, scales + first, rows, c->sx[0], out[0] + first);
        return;
    }
    for (j = 0; j < B; j++)
        y[j] = out[j] + first;
    if (fr[1])
        tph_dequant_b_f32((const float *)w, rows, B, c->sx, y);
    else
        tph_dequant_b_i32((const int32_t *)w, scales + first, rows, B, c->sx, y);
}

/* a frame's results, one port per core (tphwork.h: port 0 the caller's, port 1 the
 * worker's; disjoint outputs) */
typedef struct {
    const ctx_t *c;
    const uint32_t *fr, *w[2];
    float *const *out;
    uint32_t B, parts;
} port_job;

static void port_half(void *arg, uint32_t port)
{
    const port_job *j = (const port_job *)arg;
    dequant_port(j->c, j->fr, j->w[port], port, j->B, j->parts, j->out);
}

/* the B rows of x quantised into the kind's x slot, rows [0, m) on the caller's thread and
 * [m, B) on the worker (m = (B + 1) / 2); each row's code in rc */
typedef struct {
    const ctx_t *c;
    const float *x;
    int8_t *slot;
    uint32_t xstride, k, xs, B, blocks;   /* blocks: 0, TPH_RES_VALUE (Q8_1) or
                                             TPH_RES_VALUE_Q8_0 */
    uint32_t parts;                       /* 2: row j as vectors 2j and 2j + 1 */
    int32_t rc[TPH_MAX_VECTORS];
} quant_job;

/* a row's scale table (docs/activations.md section 2) at tab: per block d (and s), fp16
 * little-endian, zeros to a whole 8-byte beat */
static void block_table(uint8_t *tab, uint32_t nb, const uint16_t *d, const uint16_t *s,
                        uint32_t q8_1)
{
    const uint32_t fb = q8_1 ? 4u : 2u;   /* table bytes per block */
    uint32_t b;
    for (b = 0; b < nb; b++) {
        uint8_t *f = tab + fb * b;
        f[0] = (uint8_t)d[b];
        f[1] = (uint8_t)(d[b] >> 8);
        if (q8_1) {
            f[2] = (uint8_t)s[b];
            f[3] = (uint8_t)(s[b] >> 8);
        }
    }
    if ((fb * nb) % 8u)
        memset(tab + fb * nb, 0, 8u - (fb * nb) % 8u);
}

/* one row of x in two parts (TPH_T_X_PARTS 2): x's blocks at slot, its residual's at slot + xs,
 * each as quant_block_row writes one */
static int32_t quant_block_parts(const float *x, uint32_t k, int8_t *slot, uint32_t xs,
                                 uint32_t q8_1)
{
    uint16_t d[2][TPH_MAX_BLOCKS], s[2][TPH_MAX_BLOCKS];
    const uint32_t nb = k / 32u;
    int32_t rc;
    if (k % 32u || nb > TPH_MAX_BLOCKS)
        return TPH_BADARG;
    if ((rc = tph_quantise_parts(x, k, slot, d[0], q8_1 ? s[0] : NULL, slot + xs, d[1],
                                 q8_1 ? s[1] : NULL)))
        return rc;
    block_table((uint8_t *)slot + k, nb, d[0], s[0], q8_1);
    block_table((uint8_t *)slot + xs + k, nb, d[1], s[1], q8_1);
    return TPH_OK;
}

/* one row of x as blocks of 32 (docs/activations.md section 2): its K codes at slot, then its
 * scale table, little-endian fp16 fields padded with zeros to a whole 8-byte beat: Q8_1
 * (format 0x05, ``s`` set) d(b) s(b) per block, ceil(K/64) beats; Q8_0 (format 0x09) d(b) per
 * block, ceil(K/128) beats */
static int32_t quant_block_row(const float *x, uint32_t k, int8_t *slot, uint32_t q8_1)
{
    uint16_t d[TPH_MAX_BLOCKS], s[TPH_MAX_BLOCKS];
    const uint32_t nb = k / 32u;
    int32_t rc;
    if (k % 32u || nb > TPH_MAX_BLOCKS)
        return TPH_BADARG;
    if ((rc = tph_quantise_q8_1(x, k, slot, d, q8_1 ? s : NULL)))
        return rc;
    block_table((uint8_t *)slot + k, nb, d, s, q8_1);
    return TPH_OK;
}

static INLINE void quant_part(void *arg, uint32_t part)
{
    quant_job *q = (quant_job *)arg;
    const uint32_t m = (q->B + 1u) / 2u, j1 = part ? q->B : m;
    uint32_t j;
    for (j = part ? m : 0u; j < j1; j++) {
        if (q->blocks && q->parts == 2u) {  /* vectors 2j and 2j + 1 */
            q->rc[j] = quant_block_parts(q->x + j * q->xstride, q->k, q->slot + 2u * j * q->xs,
                                         q->xs, q->blocks != TPH_RES_VALUE_Q8_0);
            continue;
        }
        if (q->blocks) {                  /* 0x05: Q8_1 blocks; 0x09: Q8_0 blocks */
            q->rc[j] = quant_block_row(q->x + j * q->xstride, q->k, q->slot + j * q->xs,
                                       q->blocks != TPH_RES_VALUE_Q8_0);
            continue;
        }
        q->rc[j] = tph_quantise_rows(q->x + j * q->xstride, 1, q->k, q->slot + j * q->xs,
                                     &q->c->sx[j]);
        if (!q->rc[j] && q->B > 1u && q->xs > q->k)
            memset(q->slot + j * q->xs + q->k, 0, q->xs - q->k);
    }
}

/* Decoder._matrices_b: B rows of x (row j at x + j * xstride) quantised into the kind's slot
 * (B > 1: the vectors word and B vectors of whole 8-byte words; batched: the transfer's
 * frames set to B vectors), the transfer, every result checked (B words per row, the count in
 * rows), each row's results dequantised into out[frame * B + j] (the two ports' rows one
 * after the other) */
static int32_t matrices(const ctx_t *c, uint32_t layer, uint32_t kind, const float *x,
                        uint32_t xstride, uint32_t k, uint32_t B, float *const *out,
                        uint32_t batched)
{
    const uint32_t ti = kind_xfer(c, layer, kind), *X = xfer(c, ti), *F = x_frames(X),
                   *O = x_outs(X);
    /* x as Q8_1 blocks (every frame of the transfer 0x05: cloop.py checks they agree): K
     * codes and ceil(K/64) scale beats per vector; as Q8_0 blocks (0x09): K codes and
     * ceil(K/128) beats; else K INT8 values in whole beats */
    const uint32_t blocks = X[TPH_X_FRAMES] && F[1] >= TPH_RES_VALUE ? F[1] : 0u;
    const uint32_t xs = blocks == TPH_RES_VALUE_Q8_0 ? k + (k + 127u) / 128u * 8u
                      : blocks ? k + (k + 63u) / 64u * 8u : (k + 7u) & ~7u;
    /* x of blocks in two parts: each row two vectors of the frame, its two words added */
    const uint32_t parts = blocks && c->t[TPH_T_X_PARTS] == 2u ? 2u : 1u, nv = B * parts;
    int8_t *slot = (int8_t *)fbytes(c) + c->t[c->t[TPH_T_XSLOT_OFF] + KIND_XSLOT(kind)];
    uint32_t f, p, j;
    int32_t rc;
    quant_job qj;                         /* (rc[j < B] written by quant_part) */
    qj.c = c;
    qj.x = x;
    qj.slot = slot;
    qj.xstride = xstride;
    qj.k = k;
    qj.xs = xs;
    qj.B = B;
    qj.blocks = blocks;
    qj.parts = parts;
    if (B > 1u)                           /* both cores: a share of the rows each */
        tph_worker_run(c->work, quant_part, &qj, 0u);
    else
        quant_part(&qj, 0u);
    for (j = 0; j < B; j++)               /* the first row's error, as one after the other */
        if (qj.rc[j])
            return value_error(c, blocks == TPH_RES_VALUE_Q8_0 ? TPH_V_QUANTISE_Q8_0
                                  : blocks ? TPH_V_QUANTISE_Q8_1 : TPH_V_QUANTISE, qj.rc[j],
                               0.0);
    if (batched || parts > 1u)            /* (a no-op while the transfer has nv already) */
        set_vectors(c, ti, nv);
    if (nv > 1u) {
        const uint32_t vw[2] = {nv, 0};
        memcpy(slot - 8, vw, 8);
        stats(c)[TPH_C_X] += 8u + nv * xs;
    } else {
        stats(c)[TPH_C_X] += blocks ? xs : k;
    }
    if (kind == TPH_LM)                   /* the worker spins by the time the logits come */
        tph_worker_wake(c->work);
    if ((rc = run(c, ti)))
        return rc;
    for (f = 0; f < X[TPH_X_FRAMES]; f++) {
        const uint32_t *fr = F + f * TPH_FRAME_WORDS;
        const uint32_t *w[2];
        for (p = 0; p < 2; p++) {
            const uint32_t *o = O + (2u * f + p) * TPH_OUT_WORDS;
            uint32_t n, st, rows = fr[2 + p];
            if ((rc = received(c, o, &n, 0, &w[p])))
                return rc;
            if (n == 0)
                return matrix_fail(c, ti, f, p, TPH_W_NONE, 0, 0, rows, nv);
            st = w[p][n - 1];
            if ((st >> 8) & 0xFFu)
                return matrix_fail(c, ti, f, p, TPH_W_FLAGS, st, n, rows, nv);
            if ((st >> 16) != rows || n != rows * nv + 1u)
                return matrix_fail(c, ti, f, p, TPH_W_COUNT, st, n, rows, nv);
            if ((st & 0xFFu) != fr[0])
                return matrix_fail(c, ti, f, p, TPH_W_TAG, st, n, rows, nv);
        }
        if (kind == TPH_LM || B > 1u) {   /* both cores: a port each */
            const port_job job = {c, fr, {w[0], w[1]}, out + f * B, B, parts};
            tph_worker_run(c->work, port_half, (void *)&job, 0u);
        } else {
            for (p = 0; p < 2; p++)
                dequant_port(c, fr, w[p], p, B, parts, out + f * B);
        }
    }
    return TPH_OK;
}

/* KVCache._append of one K or V row of one (layer, KV head) at position t: the step (fixed,
 * or the running absmax's, with the cached rows of both port halves requantised when it
 * grew), the row quantised and written as the attention engine reads it (byte 16 j + 8 p + b
 * of the row's codes: byte 8 j + b of port p's row; INT8 codes, or INT16 little-endian ones
 * when KV_BITS is 16, fixed steps only: values beyond 32767 steps clipped and counted) */
static int32_t kv_one(const ctx_t *c, tph_row *row, uint32_t which, uint32_t layer,
                      uint32_t head, uint32_t t, const float *x, float *stp)
{
    int8_t *kv = (int8_t *)c->p[TPH_P_KV] + row->stream * c->stream_bytes;
    const uint32_t block = c->context * c->kv_row;
    float step = *stp, ratio = 0.0f;
    const uint32_t wide = c->t[TPH_T_KV_BITS] == 16u;
    const double top = wide ? 32767.5 : 127.5;
    uint32_t port, j;
    int32_t rc;
    if (wide && !c->t[TPH_T_KV_FIXED])    /* no running absmax for INT16 (KVCache refuses) */
        return value_error(c, TPH_V_KV_STEP, TPH_BADARG, 0.0);
    if (c->t[TPH_T_KV_FIXED]) {
        /* the fixed step: no growth, no requantisation; the values beyond 127 steps (stored
         * as +-127 by tph_kv_row; INT16: 32767 and tph_kv_row16) counted as KVCache._append
         * counts them, in double: |x| > 127.5 * step, exact (127.5 * step needs 32 of the 53
         * bits; 32767.5 * step 40). The row's
         * absmax (the library's SSE2 kernel; a NaN or an infinity refused as kv_step
         * refuses it) decides whether any value is beyond: almost never, so the count's
         * scalar loop runs only then */
        float amax;
        if ((rc = tph_absmax(x, c->d, &amax)) < 0)
            return value_error(c, TPH_V_KV_STEP, rc, 0.0);
        if (step > 0.0f && (double)amax > top * (double)step) {
            const double lim = top * (double)step;
            uint32_t i, n = 0;
            for (i = 0; i < c->d; i++)
                n += (double)fabsf(x[i]) > lim;
            stats(c)[TPH_C_CLIPPED] += n;
            row->kv_clipped += n;
        }
    } else if ((rc = tph_kv_step(x, c->d, &step, &ratio)) < 0)
        return value_error(c, TPH_V_KV_STEP, rc, 0.0);
    if (ratio > 0.0f && t) {
        if (row->kv_rows && c->io->kv_save && c->io->kv_save(c->io->ctx, which, layer, head))
            return fail(c, TPH_E_IO, TPH_NONE, 0, 0, 0, 0, 0, 0);
        for (port = 0; port < 2; port++) {
            int8_t *rows = kv + (((port * 2u + which) * c->layers + layer) * c->kvh + head) * block;
            if ((rc = tph_kv_requantise(rows, t * c->kv_row, ratio)))
                return value_error(c, TPH_V_KV_REQUANT, rc, 0.0);
        }
        stats(c)[TPH_C_REQUANT] += t * c->d;
        row->kv_requantised += t * c->d;
        stats(c)[TPH_C_GROWTHS]++;
    }
    *stp = step;
    if (wide)    /* int16 codes; the host is little-endian (tph_init): its bytes are the frame's */
        tph_kv_row16(x, c->d, step, (int16_t *)(void *)c->row);
    else
        tph_kv_row(x, c->d, step, c->row);
    for (port = 0; port < 2; port++) {
        int8_t *dst = kv + (((port * 2u + which) * c->layers + layer) * c->kvh + head) * block
                      + t * c->kv_row;
        const int8_t *src = c->row + 8u * port;
        const uint32_t words = c->kv_row / 8u;  /* (a local: the stores may alias the context) */
        for (j = 0; j < words; j++)
            memcpy(dst + 8u * j, src + 16u * j, 8);
    }
    stats(c)[TPH_C_KV] += 2u * c->kv_row;        /* the row's bytes: d, or 2 d for INT16 */
    row->kv_written += 2u * c->kv_row;
    return TPH_OK;
}

static int32_t kv_append(const ctx_t *c, tph_row *row, uint32_t layer, const float *k,
                         const float *v)
{
    int64_t *len = row->length;
    float *ks = row->k_step, *vs = row->v_step;
    uint32_t h, t;
    int32_t rc;
    if (len[layer] < 0 || len[layer] >= (int64_t)c->context)
        return fail(c, TPH_E_CONTEXT, TPH_NONE, layer, 0, (uint32_t)len[layer], 0, 0, 0);
    t = (uint32_t)len[layer];
    for (h = 0; h < c->kvh; h++) {
        if ((rc = kv_one(c, row, 0, layer, h, t, k + h * c->d, ks + layer * c->kvh + h))
            || (rc = kv_one(c, row, 1, layer, h, t, v + h * c->d, vs + layer * c->kvh + h)))
            return rc;
    }
    len[layer] = t + 1;
    return TPH_OK;
}

/* a little-endian 64-bit word (tph_init refuses a big-endian host) */
static inline void put64(uint8_t *dst, uint64_t v)
{
    memcpy(dst, &v, 8);
}

/* Decoder._attention: per KV head q quantised per query head, the score multipliers, the
 * header block (golden.attention.pack_header) and q split by port into the part slots
 * (packing.split_attention_frame: port 0 the even 8-byte words, port 1 the route word and
 * the odd ones); the transfer; every frame's words checked and turned into real values */
static int32_t attention(const ctx_t *c, const tph_row *row, uint32_t layer, const float *q,
                         float *att, uint32_t trow)
{
    const uint32_t ti = kind_xfer(c, layer, TPH_ATT), *X = xfer(c, ti), *F = x_frames(X),
                   *O = x_outs(X), *T = c->t;
    const uint32_t G = c->group, d = c->d, hb = T[TPH_T_HDR_BYTES], L =
        (uint32_t)row->length[layer];
    const float *ks = row->k_step, *vs = row->v_step;
    uint8_t *fb = fbytes(c);
    uint32_t h, g, j, beats = (hb + G * d) / 16u;
    int32_t rc;
    for (h = 0; h < c->kvh; h++) {
        const uint32_t tag = F[h * TPH_FRAME_WORDS];
        uint8_t *part0 = fb + T[T[TPH_T_PART_OFF] + 2u * h];
        uint8_t *part1 = fb + T[T[TPH_T_PART_OFF] + 2u * h + 1u];
        rc = tph_quantise_rows(q + h * G * d, G, d, (int8_t *)c->block + hb, c->sq);
        if (rc)
            return value_error(c, TPH_V_QUANTISE, rc, 0.0);
        for (g = 0; g < G; g++) {
            double cs = tph_score_scale(ks[layer * c->kvh + h], c->sq[g], d);
            rc = tph_score_multiplier(cs, T[TPH_T_SPO], T[TPH_T_MAX_SHIFT], T[TPH_T_MULT_BITS],
                                      &c->mult[g], &c->shift[g]);
            if (rc)
                return value_error(c, TPH_V_SCORE, rc, cs);
        }
        memset(c->block, 0, hb);
        put64(c->block, (uint64_t)TPH_ATTENTION_MAGIC | (uint64_t)(L & 0xFFFFu) << 16
                        | (uint64_t)(G & 0xFFu) << 32 | (uint64_t)(d & 0xFFFFu) << 40
                        | (uint64_t)(tag & 0xFFu) << 56);
        for (g = 0; g < G; g++) {
            uint32_t w = (c->mult[g] & 0xFFFFu) | (c->shift[g] & 0xFFu) << 16
                         | (T[TPH_T_KV_BITS] == 16u ? 1u : 0u) << 24;   /* the KV format code */
            c->block[8 + 4 * g] = (uint8_t)w;
            c->block[9 + 4 * g] = (uint8_t)(w >> 8);
            c->block[10 + 4 * g] = (uint8_t)(w >> 16);
            c->block[11 + 4 * g] = (uint8_t)(w >> 24);
        }
        put64(part1, (uint64_t)TPH_ROUTE_MAGIC | (uint64_t)(L & 0xFFFFu) << 16
                     | (uint64_t)(tag & 0xFFu) << 56);
        {
            const uint8_t *src = c->block;
            uint8_t *d0 = part0, *d1 = part1 + 8u;
            for (j = 0; j < beats; j++, src += 16, d0 += 8, d1 += 8) {
                memcpy(d0, src, 8);
                memcpy(d1, src + 8, 8);
            }
        }
        stats(c)[TPH_C_PARTS] += T[TPH_T_PART0] + T[TPH_T_PART1];
    }
    if ((rc = run(c, ti)))
        return rc;
    for (h = 0; h < c->kvh; h++) {
        const uint32_t *o = O + h * TPH_OUT_WORDS, aw = T[TPH_T_ATT_WORDS];
        uint32_t n, st;
        const uint32_t *w;
        if ((rc = received(c, o, &n, trow, &w)))
            return rc;
        if (n == 0)
            return fail(c, TPH_E_ATT, ti, h, 0, TPH_W_NONE, 0, 0, aw);
        st = w[n - 1];
        if ((st >> 8) & 0xFFu)
            return fail(c, TPH_E_ATT, ti, h, 0, TPH_W_FLAGS, st, n, aw);
        if (n - 1 != aw || (st >> 16) != aw)
            return fail(c, TPH_E_ATT, ti, h, 0, TPH_W_COUNT, st, n, aw);
        if ((st & 0xFFu) != F[h * TPH_FRAME_WORDS])
            return fail(c, TPH_E_ATT, ti, h, 0, TPH_W_TAG, st, n, aw);
        tph_attention_out((const int8_t *)w, w + G * d / 4u, G, d, T[TPH_T_FRAC_BITS],
                          vs[layer * c->kvh + h], att + h * G * d);
    }
    return TPH_OK;
}

/* DmaRuntime.begin_token: a chain left half-done restarted, the K/V descriptor lengths of
 * L = pos + 1 positions, the LM head switched in or out */
static int32_t begin_token(const ctx_t *c, uint32_t pos, uint32_t logits)
{
    const uint32_t *T = c->t, *kvc = T + T[TPH_T_KVCTRL_OFF], *sw = T + T[TPH_T_SWITCH_OFF];
    const uint32_t *seq0 = T + T[TPH_T_SEQ0_OFF], L = pos + 1u, n = L * c->kv_row;
    volatile uint32_t *fw = fwords(c);
    int32_t *s = state(c), rc;
    uint32_t i, off = 0;
    for (i = 0; i < 4; i++)
        off |= (uint32_t)s[TPH_S_NEXT + i] != seq0[i];
    if (off) {
        for (i = 0; i < 4; i++)
            s[TPH_S_NEXT + i] = (int32_t)seq0[i];
        if ((rc = reset_all(c)))
            return rc;
    }
    for (i = 0; i < T[TPH_T_KVCTRL_N]; i++)
        fw[kvc[i] & 0x7FFFFFFFu] = n | (kvc[i] >> 31 ? TPH_CTRL_EOF : 0u);
    stats(c)[TPH_C_DESC] += 4u * T[TPH_T_KVCTRL_N];
    if ((int32_t)logits != s[TPH_S_LINK]) {
        for (i = 0; i < 4; i++)
            fw[sw[3 * i]] = logits && sw[3 * i + 1] != TPH_NONE ? sw[3 * i + 1] : sw[3 * i + 2];
        stats(c)[TPH_C_DESC] += 16u;
        s[TPH_S_LINK] = (int32_t)logits;
    }
    s[TPH_S_L] = (int32_t)L;
    return TPH_OK;
}

/* the RoPE tables' row of position pos as float32 into cosf, sinf (the image's float64
 * tables: converted per row, once per step) */
static void rope_row(const ctx_t *c, uint32_t pos, float *cosf, float *sinf)
{
    const uint32_t half = c->d / 2u;
    uint32_t i;
    if (c->t[TPH_T_ROPE_F64]) {
        const double *cd = (const double *)c->p[TPH_P_COS] + pos * half;
        const double *sd = (const double *)c->p[TPH_P_SIN] + pos * half;
        for (i = 0; i < half; i++) {
            cosf[i] = (float)cd[i];
            sinf[i] = (float)sd[i];
        }
    } else {
        memcpy(cosf, (const float *)c->p[TPH_P_COS] + pos * half, half * sizeof(float));
        memcpy(sinf, (const float *)c->p[TPH_P_SIN] + pos * half, half * sizeof(float));
    }
}

/* the B rows' small ops between two transfers: rows [0, m) on the caller's thread, [m, B) on
 * the worker (m = (B + 1) / 2; tphwork.h), each row's ops those of the one-row step, in its
 * order (rows are independent: each its own vectors) */
enum { ROWS_NORM, ROWS_ROPE, ROWS_ADD_NORM, ROWS_SILU, ROWS_ADD };

typedef struct {
    const ctx_t *c;
    uint32_t stage, layer, B;
} rows_job;

static INLINE void rows_part(void *arg, uint32_t part)
{
    const rows_job *r = (const rows_job *)arg;
    const ctx_t *c = r->c;
    const uint32_t H = c->hidden, I = c->mlp, kvd = c->kvdim, half = c->d / 2u, l = r->layer;
    const uint32_t m = (r->B + 1u) / 2u, j1 = part ? r->B : m;
    const float *norms = (const float *)c->p[TPH_P_NORMS];
    uint32_t j;
    for (j = part ? m : 0u; j < j1; j++) {
        float *x = c->x + j * H, *n = c->n + j * H, *o = c->o + j * H;
        switch (r->stage) {
        case ROWS_NORM:
            tph_rmsnorm(x, norms + (2u * l) * H, H, c->eps, n);
            break;
        case ROWS_ROPE:
            tph_rope(c->q + j * H, c->heads, c->d, c->cosf + j * half, c->sinf + j * half,
                     c->q + j * H);
            tph_rope(c->k + j * kvd, c->kvh, c->d, c->cosf + j * half, c->sinf + j * half,
                     c->k + j * kvd);
            break;
        case ROWS_ADD_NORM:
            tph_add(x, o, H, x);
            tph_rmsnorm(x, norms + (2u * l + 1u) * H, H, c->eps, n);
            break;
        case ROWS_SILU:
            tph_silu_mul(c->g + j * I, c->u + j * I, I, c->h + j * I);
            break;
        default:
            tph_add(x, o, H, x);
        }
    }
}

/* one stage for the B rows: a job of both cores when B > 1, else here */
static INLINE void rows_run(const ctx_t *c, uint32_t stage, uint32_t layer, uint32_t B)
{
    const rows_job r = {c, stage, layer, B};
    if (B > 1u)
        tph_worker_run(c->work, rows_part, (void *)&r, 0u);
    else
        rows_part((void *)&r, 0u);
}

/* B rows through every layer (Decoder.step for one row, batched = 0; Decoder.step_rows,
 * batched = 1): the rows' vectors side by side in the work areas, each matrix transfer once
 * for all rows, attention per row; the rows' small ops between transfers shared by both cores
 * (rows_run) */
static int32_t rows_step(const ctx_t *c, tph_row *rows, uint32_t B, uint32_t batched)
{
    const uint32_t H = c->hidden, I = c->mlp, kvd = c->kvdim, half = c->d / 2u;
    const float *norms = (const float *)c->p[TPH_P_NORMS];
    float *outs[3 * TPH_MAX_VECTORS];
    uint32_t l, j, any = 0, nw = 0;
    int32_t rc;
    if (!c->p[TPH_P_COS] || !c->p[TPH_P_SIN])
        return fail(c, TPH_E_ARG, TPH_NONE, 0, 0, rows[0].token, 0, 0, 0);
    for (j = 0; j < B; j++) {
        tph_row *r = &rows[j];
        r->logits = r->logits != 0;
        r->kv_written = r->kv_requantised = r->kv_clipped = 0;
        if (r->token >= c->vocab || r->token >= c->t[TPH_T_EMBED_ROWS] || (r->logits && !r->out)
            || !r->k_step || !r->v_step || !r->length || r->stream >= c->streams)
            return fail(c, TPH_E_ARG, TPH_NONE, j, 0, r->token, 0, 0, 0);
        if (r->pos >= c->context)
            return fail(c, TPH_E_CONTEXT, TPH_NONE, 0, 0, r->pos, 0, 0, 0);
        any |= r->logits;
    }
    if (B > 1u)                           /* the worker's first job comes soon */
        tph_worker_wake(c->work);
    if ((rc = begin_token(c, rows[0].pos, any)))
        return rc;
    for (j = 0; j < B; j++) {
        rope_row(c, rows[j].pos, c->cosf + j * half, c->sinf + j * half);
        tph_embed_q8_0((const uint8_t *)c->p[TPH_P_EMBED] + rows[j].token
                       * c->t[TPH_T_EMBED_STRIDE], H, c->x + j * H);
    }
    for (l = 0; l < c->layers; l++) {
        const uint32_t ti_att = kind_xfer(c, l, TPH_ATT);
        rows_run(c, ROWS_NORM, l, B);
        for (j = 0; j < B; j++) {
            outs[j] = c->q + j * H;
            outs[B + j] = c->k + j * kvd;
            outs[2u * B + j] = c->v + j * kvd;
        }
        if ((rc = matrices(c, l, TPH_QKV, c->n, H, H, B, outs, batched)))
            return rc;
        rows_run(c, ROWS_ROPE, l, B);
        for (j = 0; j < B; j++) {
            tph_row *r = &rows[j];
            float *q = c->q + j * H, *k = c->k + j * kvd, *v = c->v + j * kvd;
            if (r->kv_rows) {
                memcpy(r->kv_rows + 2u * l * kvd, k, kvd * sizeof(float));
                memcpy(r->kv_rows + (2u * l + 1u) * kvd, v, kvd * sizeof(float));
            }
            if ((rc = kv_append(c, r, l, k, v)))
                return rc;
            if (batched)
                set_attention(c, ti_att, r->stream, (uint32_t)r->length[l], j + 1u < B);
            if ((rc = attention(c, r, l, q, c->att + j * H, j)))
                return rc;
            outs[j] = c->o + j * H;
        }
        if ((rc = matrices(c, l, TPH_O, c->att, H, H, B, outs, batched)))
            return rc;
        rows_run(c, ROWS_ADD_NORM, l, B);
        for (j = 0; j < B; j++) {
            outs[j] = c->g + j * I;
            outs[B + j] = c->u + j * I;
        }
        if ((rc = matrices(c, l, TPH_GU, c->n, H, H, B, outs, batched)))
            return rc;
        rows_run(c, ROWS_SILU, l, B);
        for (j = 0; j < B; j++)
            outs[j] = c->o + j * H;
        if ((rc = matrices(c, l, TPH_DOWN, c->h, I, I, B, outs, batched)))
            return rc;
        rows_run(c, ROWS_ADD, l, B);
    }
    if (any) {                            /* the LM head for the rows that ask, in order */
        for (j = 0; j < B; j++) {
            if (!rows[j].logits)
                continue;
            tph_rmsnorm(c->x + j * H, norms + (2u * c->layers) * H, H, c->eps, c->n + nw * H);
            outs[nw++] = rows[j].out;
        }
        if ((rc = matrices(c, TPH_NONE, TPH_LM, c->n, H, H, nw, outs, batched)))
            return rc;
    }
    return TPH_OK;
}

/* B rows of x in TPH_T_X_PARTS vectors each fit the matrix engines' frames */
static int rows_fit(const ctx_t *c, uint32_t B)
{
    const uint32_t parts = c->t[TPH_T_X_PARTS];
    return B >= 1u && (parts == 1u || parts == 2u) && B * parts <= c->vectors;
}

int32_t tph_step(void *mem, uint32_t token, uint32_t pos, uint32_t logits)
{
    const ctx_t *c = (const ctx_t *)mem;
    tph_row row;
    memset(stats(c), 0, TPH_STATS * sizeof(uint32_t));
    memset(errw(c), 0, TPH_ERR_WORDS * sizeof(uint32_t));
    if (!rows_fit(c, 1u))
        return fail(c, TPH_E_ARG, TPH_NONE, 0, 0, 1u, 0, 0, 0);
    memset(&row, 0, sizeof row);
    row.token = token;
    row.pos = pos;
    row.logits = logits;
    row.k_step = (float *)c->p[TPH_P_KSTEP];
    row.v_step = (float *)c->p[TPH_P_VSTEP];
    row.length = (int64_t *)c->p[TPH_P_LENGTH];
    row.out = (float *)c->p[TPH_P_LOGITS];
    return rows_step(c, &row, 1, 0);
}

int32_t tph_step_rows(void *mem, tph_row *rows, uint32_t B)
{
    const ctx_t *c = (const ctx_t *)mem;
    int32_t rc;
    memset(stats(c), 0, TPH_STATS * sizeof(uint32_t));
    memset(errw(c), 0, TPH_ERR_WORDS * sizeof(uint32_t));
    if (!rows || !rows_fit(c, B))
        return fail(c, TPH_E_ARG, TPH_NONE, 0, 0, B, 0, 0, 0);
    rc = rows_step(c, rows, B, 1);
    restore_chains(c);                    /* also after an error (Python: finally) */
    return rc;
}

/* ------------------------------------------------------------------ set-up */

#define ALIGN16(n) (((n) + 15u) & ~15u)

static uint32_t workspace(const uint32_t *t, uint32_t *sizes)
{
    /* V rows each: x n q att o (hidden), k v (kv dim), g u h (mlp), cos sin (d/2); sq (G),
     * sx (V), mult shift (G), block (header + G d), row (2 d: INT8 or INT16 codes) */
    const uint32_t H = t[TPH_T_HIDDEN], I = t[TPH_T_MLP], d = t[TPH_T_HEAD_DIM];
    const uint32_t G = t[TPH_T_HEADS] / t[TPH_T_KV_HEADS], kvd = t[TPH_T_KV_HEADS] * d;
    const uint32_t V = t[TPH_T_VECTORS];
    uint32_t i, total = 0;
    const uint32_t n[17] = {4 * H * V, 4 * H * V, 4 * H * V, 4 * H * V, 4 * H * V, 4 * kvd * V,
                            4 * kvd * V, 4 * I * V, 4 * I * V, 4 * I * V, 2 * d * V, 2 * d * V,
                            4 * G,
                            4 * V, 4 * G, 4 * G,
                            t[TPH_T_HDR_BYTES] + G * d + 2 * d};
    for (i = 0; i < 17; i++) {
        sizes[i] = ALIGN16(n[i]);
        total += sizes[i];
    }
    return total;
}

/* words [off, off + n) inside a table of words */
static int inside(uint32_t off, uint32_t n, uint32_t words)
{
    return n <= words && off <= words - n;
}

static int bad_header(const uint32_t *t, uint32_t words)
{
    uint32_t i, G;
    if (!t || words < TPH_T_HEADER || t[TPH_T_MAGIC] != TPH_TABLE_MAGIC || t[TPH_T_WORDS] != words)
        return 1;
    for (i = TPH_T_LAYERS; i <= TPH_T_VOCAB; i++)
        if (t[i] == 0 || t[i] > 0x1000000u)
            return 1;
    if (t[TPH_T_HEADS] % t[TPH_T_KV_HEADS] || t[TPH_T_HIDDEN] != t[TPH_T_HEADS] * t[TPH_T_HEAD_DIM]
        || t[TPH_T_HEAD_DIM] % 16u || (t[TPH_T_KV_BITS] != 8u && t[TPH_T_KV_BITS] != 16u)
        || t[TPH_T_KV_ROW] * 16u != t[TPH_T_HEAD_DIM] * t[TPH_T_KV_BITS]
        || t[TPH_T_CONTEXT] == 0 || t[TPH_T_CONTEXT] > 0xFFFFu)
        return 1;
    G = t[TPH_T_HEADS] / t[TPH_T_KV_HEADS];
    if (t[TPH_T_HDR_BYTES] % 16u || t[TPH_T_HDR_BYTES] < 8u + 4u * G || t[TPH_T_HDR_BYTES] > 4096u
        || t[TPH_T_PART0] * 2u != t[TPH_T_HDR_BYTES] + G * t[TPH_T_HEAD_DIM]
        || t[TPH_T_PART1] != t[TPH_T_PART0] + 8u
        || t[TPH_T_ATT_WORDS] != G * t[TPH_T_HEAD_DIM] / 4u + G || t[TPH_T_FRAC_BITS] > 24u
        || t[TPH_T_EMBED_STRIDE] < (t[TPH_T_HIDDEN] + 31u) / 32u * 34u)
        return 1;
    if (t[TPH_T_VECTORS] < 1u || t[TPH_T_VECTORS] > TPH_MAX_VECTORS || t[TPH_T_STREAMS] < 1u
        || t[TPH_T_STREAMS] > 256u)
        return 1;
    if (t[TPH_T_N_XFER] == 0 || !inside(t[TPH_T_XFER_OFF], t[TPH_T_N_XFER], words)
        || !inside(t[TPH_T_KIND_OFF], t[TPH_T_LAYERS] * 5u + 1u, words)
        || !inside(t[TPH_T_XSLOT_OFF], 5u, words)
        || !inside(t[TPH_T_PART_OFF], 2u * t[TPH_T_KV_HEADS], words)
        || !inside(t[TPH_T_KVCTRL_OFF], t[TPH_T_KVCTRL_N], words)
        || !inside(t[TPH_T_SWITCH_OFF], 12u, words) || !inside(t[TPH_T_SEQ0_OFF], 4u, words)
        || !inside(t[TPH_T_VEC_OFF], t[TPH_T_N_XFER], words)
        || !inside(t[TPH_T_ATTX_OFF], t[TPH_T_N_XFER], words))
        return 1;
    return 0;
}

/* the DMA memory every index of the table points into: descriptor words, slots, the cache */
static int bad_memory(const uint32_t *t)
{
    const uint32_t fw = t[TPH_T_FRAMES_BYTES] / 4u, fb = t[TPH_T_FRAMES_BYTES];
    uint32_t i;
    uint64_t kv = 4u * (uint64_t)t[TPH_T_LAYERS] * t[TPH_T_KV_HEADS] * t[TPH_T_CONTEXT]
                  * t[TPH_T_KV_ROW];
    if (kv != t[TPH_T_KV_STREAM_BYTES] || kv * t[TPH_T_STREAMS] > t[TPH_T_KV_BYTES])
        return 1;
    for (i = 0; i < 5; i++) {     /* V > 1: the vectors word before vector 0, V vectors */
        const uint32_t k = i == 3 ? t[TPH_T_MLP] : t[TPH_T_HIDDEN], V = t[TPH_T_VECTORS];
        const uint32_t off = t[t[TPH_T_XSLOT_OFF] + i];
        if (!inside(off, k, fb) || (V > 1u && (off < 8u || off % 4u
                                                || !inside(off - 8u, 8u + V * ((k + 7u) & ~7u), fb))))
            return 1;
    }
    for (i = 0; i < 2u * t[TPH_T_KV_HEADS]; i++)
        if (!inside(t[t[TPH_T_PART_OFF] + i], t[i % 2 ? TPH_T_PART1 : TPH_T_PART0], fb))
            return 1;
    for (i = 0; i < t[TPH_T_KVCTRL_N]; i++)
        if ((t[t[TPH_T_KVCTRL_OFF] + i] & 0x7FFFFFFFu) >= fw)
            return 1;
    for (i = 0; i < 4; i++)
        if (t[t[TPH_T_SWITCH_OFF] + 3 * i] >= fw)
            return 1;
    return 0;
}

/* the batched step's records: a B-vector record for the matrix transfers that have one (its
 * descriptors' words inside the frames region), an attention record for each attention
 * transfer and none for the others (its CONTROL, BUFFER and NXTDESC words inside) */
static int bad_batched(const uint32_t *t, uint32_t words)
{
    const uint32_t nx = t[TPH_T_N_XFER], fw = t[TPH_T_FRAMES_BYTES] / 4u;
    const uint32_t last = fw - TPH_DESC_BYTES / 4u;   /* a descriptor's first word at most */
    uint32_t i, j;
    for (i = 0; i < nx; i++) {
        const uint32_t *X = t + t[t[TPH_T_XFER_OFF] + i];
        uint32_t off = t[t[TPH_T_VEC_OFF] + i], n;
        if (off) {
            if (X[TPH_X_KIND] == TPH_ATT || !inside(off, 1u, words) || t[off] > 256u
                || !inside(off + 1u, t[off] * TPH_VEC_WORDS, words))
                return 1;
            for (j = 0; j < t[off]; j++) {
                const uint32_t *M = t + off + 1u + j * TPH_VEC_WORDS;
                if (M[0] > last || M[1] > last || M[4] < 8u || M[5] == 0u)
                    return 1;
            }
        }
        off = t[t[TPH_T_ATTX_OFF] + i];
        if ((X[TPH_X_KIND] == TPH_ATT) != (off != 0u))
            return 1;
        if (!off)
            continue;
        if (!inside(off, 1u, words) || (n = t[off]) > 1024u || !inside(off + 1u, n + 1u, words))
            return 1;
        for (j = 0; j < n; j++)
            if ((t[off + 1u + j] & 0x7FFFFFFFu) >= fw)
                return 1;
        off += 1u + n;
        if ((n = t[off]) > 1024u || !inside(off + 1u, 2u * n + 1u, words))
            return 1;
        for (j = 0; j < n; j++)
            if (t[off + 1u + 2u * j] >= fw)
                return 1;
        off += 1u + 2u * n;
        if ((n = t[off]) > 4u || !inside(off + 1u, 4u * n, words))
            return 1;
        for (j = 0; j < n; j++)
            if (t[off + 1u + 4u * j] > 3u || t[off + 2u + 4u * j] >= fw)
                return 1;
    }
    return 0;
}

/* every transfer record inside the table, its kind's frames and result slots as the step
 * uses them, every word index inside the frames region */
static int bad_transfers(const uint32_t *t, uint32_t words)
{
    const uint32_t nx = t[TPH_T_N_XFER], L = t[TPH_T_LAYERS], H = t[TPH_T_HIDDEN];
    const uint32_t kvd = t[TPH_T_KV_HEADS] * t[TPH_T_HEAD_DIM], I = t[TPH_T_MLP];
    const uint32_t fw = t[TPH_T_FRAMES_BYTES] / 4u;
    uint32_t i, j, ch;
    if (bad_memory(t))
        return 1;
    for (i = 0; i < nx; i++) {
        uint32_t off = t[t[TPH_T_XFER_OFF] + i];
        const uint32_t *X;
        if (!inside(off, TPH_X_FIXED, words))
            return 1;
        X = t + off;
        if (X[TPH_X_FRAMES] > 64 || X[TPH_X_DESC] > 4 || X[TPH_X_TAILS] > 4
            || X[TPH_X_OUTS] > 128 || !inside(off, x_words(X), words))
            return 1;
        for (j = 0; j < X[TPH_X_TAILS]; j++)
            if (x_tails(X)[j * TPH_TAIL_WORDS] > 3 || x_tails(X)[j * TPH_TAIL_WORDS + 2] >= fw)
                return 1;
        for (j = 0; j < X[TPH_X_DESC]; j++) {
            const uint32_t *D = x_desc(X) + j * TPH_DESC_WORDS;
            if (D[0] > 3 || D[1] < TPH_D_STATUS || D[2] == 0 || D[2] > fw / 16u
                || D[1] >= fw - (D[2] - 1u) * (TPH_DESC_BYTES / 4u))
                return 1;
        }
        for (j = 0; j < X[TPH_X_OUTS]; j++) {
            const uint32_t *o = x_outs(X) + j * TPH_OUT_WORDS;
            if (o[2] >= fw || o[2] < TPH_D_STATUS || o[3] >= t[TPH_T_RESULTS_BYTES] / 4u)
                return 1;
        }
        for (ch = 0; ch < 4; ch++)
            if ((X[TPH_X_NEXT_LOGITS + ch] >= nx || X[TPH_X_NEXT_BODY + ch] >= nx)
                && X[TPH_X_FIRST + ch])
                return 1;
    }
    for (i = 0; i <= L * 5u; i++) {
        uint32_t ti = t[t[TPH_T_KIND_OFF] + i], kind = i == L * 5u ? TPH_LM : i % 5u, nf;
        const uint32_t *X;
        const uint32_t want[TPH_KINDS][3] = {{H, kvd, kvd}, {0, 0, 0}, {H, 0, 0}, {I, I, 0},
                                             {H, 0, 0}, {t[TPH_T_VOCAB], 0, 0}};
        const uint32_t frames[TPH_KINDS] = {3, t[TPH_T_KV_HEADS], 1, 2, 1, 1};
        if (ti >= nx)
            return 1;
        X = t + t[t[TPH_T_XFER_OFF] + ti];
        nf = X[TPH_X_FRAMES];
        if (X[TPH_X_KIND] != kind || nf != frames[kind]
            || X[TPH_X_OUTS] != (kind == TPH_ATT ? nf : 2u * nf))
            return 1;
        for (j = 0; j < X[TPH_X_OUTS]; j++) {
            const uint32_t *o = x_outs(X) + j * TPH_OUT_WORDS;
            if (o[0] != (kind == TPH_ATT ? j : j / 2u) || o[1] != (kind == TPH_ATT ? 0u : j % 2u)
                || (o[4] >= t[TPH_T_TRACE_WORDS] && t[TPH_T_TRACE_WORDS])
                || o[5] >= t[TPH_T_TRACE_OUTS])
                return 1;
        }
        if (kind != TPH_ATT) {
            /* x in blocks (0x05: Q8_1, 0x09: Q8_0): every frame of the transfer the same, K a
             * multiple of 32, the slot inside the frames region with its scale tables (V
             * vectors) */
            const uint32_t blocks = x_frames(X)[1] >= TPH_RES_VALUE ? x_frames(X)[1] : 0u;
            const uint32_t k = kind == TPH_DOWN ? I : H, V = t[TPH_T_VECTORS];
            const uint32_t off = t[t[TPH_T_XSLOT_OFF] + KIND_XSLOT(kind)];
            const uint32_t per = blocks == TPH_RES_VALUE_Q8_0 ? (k + 127u) / 128u
                                                              : (k + 63u) / 64u;
            for (j = 0; j < nf; j++) {
                const uint32_t *fr = x_frames(X) + j * TPH_FRAME_WORDS;
                if (fr[2] + fr[3] != want[kind][j] || fr[1] > TPH_RES_VALUE_Q8_0
                    || (fr[1] >= TPH_RES_VALUE ? fr[1] : 0u) != blocks)
                    return 1;
            }
            if (blocks && (k % 32u || k / 32u > TPH_MAX_BLOCKS
                           || !inside(off, (V > 1u ? V : 1u) * (k + per * 8u),
                                      t[TPH_T_FRAMES_BYTES])))
                return 1;
        }
    }
    return bad_batched(t, words);
}

/* every result slot on a line and inside the results region for the length its S2MM
 * descriptor gives, in whole lines (what received() invalidates) */
static int bad_slots(const uint32_t *t, const uint32_t *fw)
{
    const uint32_t words = t[TPH_T_RESULTS_BYTES] / 4u, line = TPH_LINE / 4u;
    uint32_t i, j;
    for (i = 0; i < t[TPH_T_N_XFER]; i++) {
        const uint32_t *X = t + t[t[TPH_T_XFER_OFF] + i];
        for (j = 0; j < X[TPH_X_OUTS]; j++) {
            const uint32_t *o = x_outs(X) + j * TPH_OUT_WORDS;
            uint32_t cap = (fw[o[2] - TPH_D_STATUS + TPH_D_CONTROL] & TPH_LEN_MASK) >> 2;
            if (o[3] % line || !inside(o[3], (cap + line - 1u) / line * line, words))
                return 1;
        }
    }
    return 0;
}

/* the worker's memory after the work areas: 64-byte aligned inside its share */
#define WORK_BYTES (tph_worker_bytes() + 64u)

uint32_t tph_ctx_bytes(const uint32_t *table, uint32_t words)
{
    uint32_t sizes[17];
    if (bad_header(table, words))
        return 0;
    return ALIGN16((uint32_t)sizeof(ctx_t)) + workspace(table, sizes) + WORK_BYTES;
}

uint32_t tph_threads(void *mem, uint32_t threads, uint32_t spin_us)
{
    ctx_t *c = (ctx_t *)mem;
    tph_worker_stop(c->work);
    return tph_worker_start(c->work, threads, spin_us);
}

void tph_free(void *mem)
{
    tph_worker_stop(((ctx_t *)mem)->work);
}

int32_t tph_loop_argmax(void *mem, const float *x, uint32_t n, uint32_t last)
{
    return tph_argmax_halves(((ctx_t *)mem)->work, x, n, last);
}

int32_t tph_init(void *mem, uint32_t bytes, const uint32_t *t, uint32_t words,
                 void *const *ptrs, const tph_io *io)
{
    ctx_t *c = (ctx_t *)mem;
    uint32_t sizes[17], i, need = tph_ctx_bytes(t, words);
    uint8_t *w;
    const uint32_t one = 1;
    if (!need || bytes < need || !mem || ((uintptr_t)mem & 15u) || !ptrs || !io
        || bad_transfers(t, words))
        return TPH_E_ARG;
    if (ptrs[TPH_P_FRAMES] && bad_slots(t, (const uint32_t *)ptrs[TPH_P_FRAMES]))
        return TPH_E_ARG;
    if (*(const uint8_t *)&one != 1)      /* the frames' fields are little-endian */
        return TPH_E_ARG;
    for (i = 0; i < 2; i++)
        if (!io->regs[i] && (!io->read || !io->write))
            return TPH_E_ARG;
    if (!ptrs[TPH_P_FRAMES] || !ptrs[TPH_P_KV] || !ptrs[TPH_P_EMBED] || !ptrs[TPH_P_NORMS]
        || !ptrs[TPH_P_STATE] || !ptrs[TPH_P_STATS] || !ptrs[TPH_P_ERR] || !ptrs[TPH_P_XSTATE]
        || !ptrs[TPH_P_RESULTS] || !io->sync || t[TPH_T_RESULTS_BYTES] % TPH_LINE)
        return TPH_E_ARG;
    memset(mem, 0, need);
    c->t = t;
    c->p = ptrs;
    c->io = io;
    c->layers = t[TPH_T_LAYERS];
    c->hidden = t[TPH_T_HIDDEN];
    c->mlp = t[TPH_T_MLP];
    c->heads = t[TPH_T_HEADS];
    c->kvh = t[TPH_T_KV_HEADS];
    c->d = t[TPH_T_HEAD_DIM];
    c->vocab = t[TPH_T_VOCAB];
    c->group = c->heads / c->kvh;
    c->kvdim = c->kvh * c->d;
    c->context = t[TPH_T_CONTEXT];
    c->kv_row = t[TPH_T_KV_ROW];
    c->vectors = t[TPH_T_VECTORS];
    c->streams = t[TPH_T_STREAMS];
    c->stream_bytes = t[TPH_T_KV_STREAM_BYTES];
    c->nx = t[TPH_T_N_XFER];
    memcpy(&c->eps, &t[TPH_T_EPS], sizeof c->eps);
    workspace(t, sizes);
    w = (uint8_t *)mem + ALIGN16((uint32_t)sizeof(ctx_t));
    {   /* the float work areas, in workspace()'s order */
        float **fp[14] = {&c->x, &c->n, &c->q, &c->att, &c->o, &c->k, &c->v, &c->g, &c->u,
                           &c->h, &c->cosf, &c->sinf, &c->sq, &c->sx};
        for (i = 0; i < 14; i++) {
            *fp[i] = (float *)w;
            w += sizes[i];
        }
    }
    c->mult = (uint32_t *)w;
    w += sizes[14];
    c->shift = (uint32_t *)w;
    w += sizes[15];
    c->block = w;
    c->row = (int8_t *)(w + t[TPH_T_HDR_BYTES] + c->group * c->d);
    w += sizes[16];
    c->work = (void *)(((uintptr_t)w + 63u) & ~(uintptr_t)63u);
    tph_worker_start(c->work, 1u, 0u);    /* serial until tph_threads */
    return TPH_OK;
}
