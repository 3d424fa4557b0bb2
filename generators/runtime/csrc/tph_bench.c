/* tph_bench: the host small ops of one SmolLM2-135M token, composed from tphost's kernels as
 * the decoder runs them (generators/runtime/decoder.py), for `make host-bench`
 * (tools/host_bench.py): counted with valgrind --tool=callgrind --toggle-collect=bench_token,
 * timed natively. No engine work: the matrix results and attention outputs are fixed inputs.
 *
 *     tph_bench TOKENS CONTEXT FORMAT [nogrowth]
 *         FORMAT: int8 (INT8 layer rows) | q4 (Q4_1 layer rows); nogrowth: skip bench_growth
 *
 * Per token (DESIGN.md section 8; 30 layers, hidden 576, MLP 1536, 9 query / 3 KV heads of 64,
 * vocabulary 49,152, the LM head INT8 rows in both formats): the embedding row (Q8_0), per
 * layer RMSNorm, quantise, q/k/v dequantisation, RoPE, 3 KV heads x (K, V) appended at row
 * CONTEXT - 1 (no step growth: the steady state; bench_growth counts one growth apart), per KV
 * head the 3 query heads quantised, 3 score multipliers and the attention output, o_proj,
 * residual, RMSNorm, gate/up, SiLU*up, down, residual; the final RMSNorm, the LM head's
 * dequantisation and the greedy argmax (sampling).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tphost.h"

#define LAYERS 30
#define HIDDEN 576
#define MLP 1536
#define HEADS 9
#define KV_HEADS 3
#define HEAD_DIM 64
#define GROUP (HEADS / KV_HEADS)
#define VOCAB 49152
#define EPS 1e-5f
#define STEPS_PER_OCTAVE 170
#define MAX_SHIFT 47
#define MULT_BITS 16
#define FRAC_BITS 24

typedef struct {
    int q4;
    uint32_t ctx;
    float *x, *n, *h, *y, *q, *k, *v, *kr, *vr, *att, *g, *u, *logits;
    float *norm_w, *cos_h, *sin_h, *scale_h, *scale_m, *scale_v, *f32res;
    int32_t *i32res;
    int8_t *xq, *qq, *kv;           /* kv: LAYERS x KV_HEADS x (K, V) x ctx x HEAD_DIM */
    float *kv_step;
    uint8_t *embed;                 /* one Q8_0 row */
    int8_t *att_y;
    uint32_t att_z[GROUP], mult[HEADS], shift[HEADS];
    float qs[GROUP];
    uint32_t calls;
} state_t;

static uint32_t rng = 12345u;

static float frand(void)            /* deterministic values in about [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(int32_t)(rng >> 8) / 8388608.0f - 1.0f;
}

static void *alloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static float *farr(size_t n, float scale)
{
    float *a = alloc(n * sizeof *a);
    size_t i;
    for (i = 0; i < n; i++)
        a[i] = frand() * scale;
    return a;
}

static void setup(state_t *s)
{
    size_t i, kvn = (size_t)LAYERS * KV_HEADS * 2 * s->ctx * HEAD_DIM;
    s->x = farr(HIDDEN, 1.0f);
    s->n = farr(HIDDEN, 1.0f);
    s->h = farr(MLP, 1.0f);
    s->y = farr(VOCAB, 1.0f);
    s->q = farr(HIDDEN, 1.0f);
    s->k = farr(KV_HEADS * HEAD_DIM, 1.0f);
    s->v = farr(KV_HEADS * HEAD_DIM, 1.0f);
    s->kr = farr(KV_HEADS * HEAD_DIM, 1.0f);  /* the rows appended (values as RoPE'd k, v) */
    s->vr = farr(KV_HEADS * HEAD_DIM, 1.0f);
    s->att = farr(HIDDEN, 1.0f);
    s->g = farr(MLP, 4.0f);
    s->u = farr(MLP, 1.0f);
    s->logits = farr(VOCAB, 1.0f);
    s->norm_w = farr(HIDDEN, 1.0f);
    s->cos_h = farr(HEAD_DIM / 2, 1.0f);
    s->sin_h = farr(HEAD_DIM / 2, 1.0f);
    s->scale_h = farr(VOCAB, 0.001f);
    s->scale_m = farr(MLP, 0.001f);
    s->scale_v = farr(HIDDEN, 0.001f);
    s->f32res = farr(VOCAB, 1000.0f);
    s->i32res = alloc(VOCAB * sizeof *s->i32res);
    for (i = 0; i < VOCAB; i++)
        s->i32res[i] = (int32_t)(frand() * 1e6f);
    s->xq = alloc(MLP);
    s->qq = alloc(HEADS * HEAD_DIM);
    s->kv = alloc(kvn);
    for (i = 0; i < kvn; i++)
        s->kv[i] = (int8_t)(frand() * 127.0f);
    s->kv_step = alloc(LAYERS * KV_HEADS * 2 * sizeof *s->kv_step);
    for (i = 0; i < (size_t)LAYERS * KV_HEADS * 2; i++)
        s->kv_step[i] = 1.0f;      /* |kr|, |vr| < 127 * step: the step does not grow */
    s->embed = alloc(HIDDEN / 32 * 34);
    for (i = 0; i < HIDDEN / 32 * 34; i++)
        s->embed[i] = (uint8_t)(frand() * 127.0f);
    for (i = 0; i < HIDDEN / 32; i++) {
        s->embed[i * 34] = 0x00;   /* d = fp16 0x1800 = 2^-9 */
        s->embed[i * 34 + 1] = 0x18;
    }
    s->att_y = alloc(GROUP * HEAD_DIM);
    for (i = 0; i < GROUP * HEAD_DIM; i++)
        s->att_y[i] = (int8_t)(frand() * 127.0f);
    for (i = 0; i < GROUP; i++)
        s->att_z[i] = 1u << 24;
}

/* the engines' results of one matrix (fixed: no engine compute here) */
static void dequant(state_t *s, const float *scale, uint32_t n, float sx, float *out, int head)
{
    if (s->q4 && !head)
        tph_dequant_f32(s->f32res, n, sx, out);
    else
        tph_dequant_i32(s->i32res, scale, n, sx, out);
}

static int check(int32_t rc)
{
    if (rc < 0) {
        fprintf(stderr, "kernel error %d\n", rc);
        exit(2);
    }
    return rc;
}

/* one activation vector quantised (the engines' input): its scale */
static float quant(state_t *s, const float *x, uint32_t n)
{
    float sx;
    check(tph_quantise_rows(x, 1, n, s->xq, &sx));
    return sx;
}

__attribute__((noinline)) void bench_token(state_t *s)
{
    uint32_t l, kh, g, t = s->ctx - 1;
    float sx;
    tph_embed_q8_0(s->embed, HIDDEN, s->x);
    for (l = 0; l < LAYERS; l++) {
        tph_rmsnorm(s->x, s->norm_w, HIDDEN, EPS, s->n);
        sx = quant(s, s->n, HIDDEN);
        dequant(s, s->scale_v, HIDDEN, sx, s->q, 0);
        dequant(s, s->scale_v, KV_HEADS * HEAD_DIM, sx, s->k, 0);
        dequant(s, s->scale_v, KV_HEADS * HEAD_DIM, sx, s->v, 0);
        tph_rope(s->q, HEADS, HEAD_DIM, s->cos_h, s->sin_h, s->q);
        tph_rope(s->k, KV_HEADS, HEAD_DIM, s->cos_h, s->sin_h, s->k);
        for (kh = 0; kh < KV_HEADS; kh++) {
            size_t base = ((size_t)(l * KV_HEADS + kh) * 2) * s->ctx * HEAD_DIM;
            float *st = s->kv_step + (l * KV_HEADS + kh) * 2;
            check(tph_kv_append(s->kv + base, t, HEAD_DIM, st, s->kr + kh * HEAD_DIM));
            check(tph_kv_append(s->kv + base + (size_t)s->ctx * HEAD_DIM, t, HEAD_DIM, st + 1,
                                s->vr + kh * HEAD_DIM));
        }
        for (kh = 0; kh < KV_HEADS; kh++) {
            const float *st = s->kv_step + (l * KV_HEADS + kh) * 2;
            check(tph_quantise_rows(s->q + kh * GROUP * HEAD_DIM, GROUP, HEAD_DIM, s->qq, s->qs));
            for (g = 0; g < GROUP; g++)
                check(tph_score_multiplier(tph_score_scale(st[0], s->qs[g], HEAD_DIM),
                                           STEPS_PER_OCTAVE, MAX_SHIFT, MULT_BITS,
                                           &s->mult[kh * GROUP + g], &s->shift[kh * GROUP + g]));
            tph_attention_out(s->att_y, s->att_z, GROUP, HEAD_DIM, FRAC_BITS, st[1],
                              s->att + kh * GROUP * HEAD_DIM);
        }
        dequant(s, s->scale_v, HIDDEN, quant(s, s->att, HIDDEN), s->n, 0);     /* o_proj */
        tph_add(s->x, s->n, HIDDEN, s->x);
        tph_rmsnorm(s->x, s->norm_w, HIDDEN, EPS, s->n);
        sx = quant(s, s->n, HIDDEN);
        dequant(s, s->scale_m, MLP, sx, s->g, 0);                              /* gate */
        dequant(s, s->scale_m, MLP, sx, s->u, 0);                              /* up */
        tph_silu_mul(s->g, s->u, MLP, s->h);
        dequant(s, s->scale_v, HIDDEN, quant(s, s->h, MLP), s->n, 0);          /* down */
        tph_add(s->x, s->n, HIDDEN, s->x);
    }
    tph_rmsnorm(s->x, s->norm_w, HIDDEN, EPS, s->n);
    dequant(s, s->scale_h, VOCAB, quant(s, s->n, HIDDEN), s->logits, 1);      /* LM head */
    s->calls += (uint32_t)tph_argmax(s->logits, VOCAB) & 1u;
}

/* one step growth at row CONTEXT - 1: every cached row of one KV head requantised */
__attribute__((noinline)) void bench_growth(state_t *s)
{
    float step = 0.001f;
    check(tph_kv_append(s->kv, s->ctx - 1, HEAD_DIM, &step, s->kr));
}

int main(int argc, char **argv)
{
    state_t s;
    uint32_t tokens, i;
    struct timespec t0, t1;
    double ns;
    if (argc < 4 || argc > 5 || (strcmp(argv[3], "int8") && strcmp(argv[3], "q4"))
        || (argc == 5 && strcmp(argv[4], "nogrowth"))) {
        fprintf(stderr, "usage: %s TOKENS CONTEXT int8|q4 [nogrowth]\n", argv[0]);
        return 2;
    }
    memset(&s, 0, sizeof s);
    tokens = (uint32_t)strtoul(argv[1], NULL, 10);
    s.ctx = (uint32_t)strtoul(argv[2], NULL, 10);
    s.q4 = !strcmp(argv[3], "q4");
    if (tokens == 0 || s.ctx == 0 || s.ctx > 65535) {
        fprintf(stderr, "TOKENS >= 1, 1 <= CONTEXT <= 65535\n");
        return 2;
    }
    setup(&s);
    bench_token(&s);                /* warm caches */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < tokens; i++)
        bench_token(&s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / tokens;
    if (argc == 4)
        bench_growth(&s);
    printf("tokens %u context %u format %s ns_per_token %.0f check %u\n", tokens, s.ctx,
           argv[3], ns, s.calls);
    return 0;
}
