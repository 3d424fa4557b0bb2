/* The write-up's CPU kernels (shared/reference/pynq-z1-ternary-writeup.txt, section 7 and its
 * 2026-09-13 update), written again in C at SmolLM2-135M's sizes for make a9-model's
 * calibration (tools/a9_model.py): the board measured them on its Cortex-A9, the model
 * models them the way it models the C loop, and the difference is the model's error.
 *
 *   wu_small_ops  everything of one token except the matrix multiplies and attention: the
 *                 embedding row, RMSNorm twice a layer and once at the end, activation
 *                 quantisation before each matrix (x for q/k/v, o, gate/up, down), the int32
 *                 results dequantised by their row scales, RoPE on q and k, SiLU(gate) x up,
 *                 two residual adds a layer (board: 4.2 ms a token)
 *   wu_attention  INT8 attention at context 512 for one token: per layer and query head
 *                 (9 heads on 3 KV heads), scores q8 . K8 in int32, softmax in float,
 *                 probabilities quantised to int8, p8 . V8 in int32 (board: 83 ms, "an
 *                 effective 0.21 G MAC/s")
 *   wu_dot        an INT8 dot product on L1-resident data (board: "the measured upper limit
 *                 of the CPU's INT8 dot product, 0.28 G MAC/s")
 *
 * The write-up names no compiler or flags: built as its own board build most likely was
 * (assumed: the board's own gcc at -O2 with its defaults, a9model.WRITEUP_FLAGS: ARMv7-A,
 * VFPv3-D16, no NEON). usage: writeup small|attention|dot REPS [LAYERS] (attention: LAYERS of
 * the 30, all by default)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HID 576
#define FF 1536
#define LAYERS 30
#define HEADS 9
#define KVH 3
#define HD 64
#define CTX 512
#define VOCAB 49152
#define DOT_N 4096
#define DOT_REPS 256

typedef struct {
    float x[HID], h[HID], q[HEADS * HD], k[KVH * HD], v[KVH * HD], o[HID];
    float g[FF], u[FF], norm_w[2 * LAYERS + 1][HID];
    float scale[LAYERS][HID + 2 * KVH * HD + HID + 2 * FF + HID];
    float cosv[HD / 2], sinv[HD / 2];
    int32_t acc[FF];
    int8_t xq[FF];
    int8_t *emb;            /* VOCAB x HID */
    int8_t *kc, *vc;        /* LAYERS x KVH x CTX x HD */
    int8_t q8[HEADS * HD];
    float att[HEADS * HD];
    float score[CTX];
    int8_t p8[CTX];
    int8_t da[DOT_N], db[DOT_N];
    int32_t dot;
} wu_state;

static void rmsnorm(float *out, const float *x, const float *w, uint32_t n)
{
    float s = 0.0f;
    uint32_t i;
    for (i = 0; i < n; i++)
        s += x[i] * x[i];
    s = 1.0f / sqrtf(s / (float)n + 1e-5f);
    for (i = 0; i < n; i++)
        out[i] = x[i] * s * w[i];
}

static float quantise(int8_t *q, const float *x, uint32_t n)
{
    float m = 0.0f, inv;
    uint32_t i;
    for (i = 0; i < n; i++)
        m = fmaxf(m, fabsf(x[i]));
    inv = m > 0.0f ? 127.0f / m : 0.0f;
    for (i = 0; i < n; i++)
        q[i] = (int8_t)lrintf(x[i] * inv);
    return m / 127.0f;
}

static void dequant(float *out, const int32_t *acc, const float *scale, float xs, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i++)
        out[i] = (float)acc[i] * scale[i] * xs;
}

static void rope(float *v, uint32_t heads, const float *c, const float *s)
{
    uint32_t h, i;
    for (h = 0; h < heads; h++) {
        float *p = v + h * HD;
        for (i = 0; i < HD / 2; i++) {
            float a = p[i], b = p[i + HD / 2];
            p[i] = a * c[i] - b * s[i];
            p[i + HD / 2] = b * c[i] + a * s[i];
        }
    }
}

/* the matrix multiply is the PL's: its int32 results stand in acc */
__attribute__((noinline, noclone)) void wu_small_ops(wu_state *s, uint32_t token)
{
    uint32_t l, i;
    float xs;
    const int8_t *e = s->emb + (size_t)token * HID;
    for (i = 0; i < HID; i++)
        s->x[i] = (float)e[i] * (1.0f / 64.0f);
    for (l = 0; l < LAYERS; l++) {
        const float *sc = s->scale[l];
        rmsnorm(s->h, s->x, s->norm_w[2 * l], HID);
        xs = quantise(s->xq, s->h, HID);
        dequant(s->q, s->acc, sc, xs, HEADS * HD);
        dequant(s->k, s->acc, sc + HID, xs, KVH * HD);
        dequant(s->v, s->acc, sc + HID + KVH * HD, xs, KVH * HD);
        rope(s->q, HEADS, s->cosv, s->sinv);
        rope(s->k, KVH, s->cosv, s->sinv);
        xs = quantise(s->xq, s->att, HID);
        dequant(s->o, s->acc, sc + HID + 2 * KVH * HD, xs, HID);
        for (i = 0; i < HID; i++)
            s->x[i] += s->o[i];
        rmsnorm(s->h, s->x, s->norm_w[2 * l + 1], HID);
        xs = quantise(s->xq, s->h, HID);
        dequant(s->g, s->acc, sc + 2 * HID + 2 * KVH * HD, xs, FF);
        dequant(s->u, s->acc, sc + 2 * HID + 2 * KVH * HD + FF, xs, FF);
        for (i = 0; i < FF; i++)
            s->g[i] = s->g[i] / (1.0f + expf(-s->g[i])) * s->u[i];
        xs = quantise(s->xq, s->g, FF);
        dequant(s->o, s->acc, sc + 2 * HID + 2 * KVH * HD + 2 * FF, xs, HID);
        for (i = 0; i < HID; i++)
            s->x[i] += s->o[i];
    }
    rmsnorm(s->h, s->x, s->norm_w[2 * LAYERS], HID);
}

__attribute__((noinline, noclone)) void wu_attention(wu_state *s, uint32_t layers)
{
    uint32_t l, h, t, d;
    for (l = 0; l < layers; l++) {
        for (h = 0; h < HEADS; h++) {
            const size_t base = ((size_t)l * KVH + h / (HEADS / KVH)) * CTX * HD;
            const int8_t *K = s->kc + base, *V = s->vc + base, *q = s->q8 + h * HD;
            float m = -INFINITY, sum = 0.0f, inv;
            int32_t o[HD];
            for (t = 0; t < CTX; t++) {
                int32_t a = 0;
                for (d = 0; d < HD; d++)
                    a += (int32_t)q[d] * K[t * HD + d];
                s->score[t] = (float)a * (1.0f / 1024.0f);
                m = fmaxf(m, s->score[t]);
            }
            for (t = 0; t < CTX; t++) {
                s->score[t] = expf(s->score[t] - m);
                sum += s->score[t];
            }
            inv = 127.0f / sum;
            for (t = 0; t < CTX; t++)
                s->p8[t] = (int8_t)lrintf(s->score[t] * inv);
            for (d = 0; d < HD; d++)
                o[d] = 0;
            for (t = 0; t < CTX; t++) {
                const int32_t p = s->p8[t];
                for (d = 0; d < HD; d++)
                    o[d] += p * V[t * HD + d];
            }
            for (d = 0; d < HD; d++)
                s->att[h * HD + d] = (float)o[d] * (1.0f / 16384.0f);
        }
    }
}

__attribute__((noinline, noclone)) void wu_dot(wu_state *s)
{
    int32_t a = 0;
    uint32_t r, i;
    for (r = 0; r < DOT_REPS; r++) {
        __asm__ __volatile__("" : : : "memory");   /* each pass reads the vectors again */
        for (i = 0; i < DOT_N; i++)
            a += (int32_t)s->da[i] * s->db[i];
    }
    s->dot = a;
}

int main(int argc, char **argv)
{
    wu_state *s;
    uint32_t reps, layers, i, r;
    uint64_t macs = 0;
    int32_t sink = 0;
    size_t kv = (size_t)LAYERS * KVH * CTX * HD;
    if (argc < 3 || argc > 4 || (strcmp(argv[1], "small") && strcmp(argv[1], "attention")
                                 && strcmp(argv[1], "dot"))) {
        fprintf(stderr, "usage: writeup small|attention|dot REPS [LAYERS]\n");
        return 2;
    }
    reps = (uint32_t)strtoul(argv[2], NULL, 10);
    layers = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : LAYERS;
    if (layers < 1 || layers > LAYERS) {
        fprintf(stderr, "writeup: LAYERS is 1..%d\n", LAYERS);
        return 2;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return 1;
    s->emb = malloc((size_t)VOCAB * HID);
    s->kc = malloc(kv);
    s->vc = malloc(kv);
    if (!s->emb || !s->kc || !s->vc)
        return 1;
    for (i = 0; i < (uint32_t)VOCAB * HID; i++)
        s->emb[i] = (int8_t)(i * 2654435761u >> 25);
    for (i = 0; i < kv; i++) {
        s->kc[i] = (int8_t)(i * 2246822519u >> 25);
        s->vc[i] = (int8_t)(i * 3266489917u >> 25);
    }
    for (i = 0; i < FF; i++)
        s->acc[i] = (int32_t)(i * 7919u % 20001u) - 10000;
    for (i = 0; i < (2 * LAYERS + 1) * HID; i++)
        (&s->norm_w[0][0])[i] = 1.0f + (float)(i % 7) * 0.01f;
    for (i = 0; i < sizeof(s->scale) / sizeof(float); i++)
        (&s->scale[0][0])[i] = 1e-3f * (float)(1 + i % 13);
    for (i = 0; i < HD / 2; i++) {
        s->cosv[i] = cosf((float)i * 0.1f);
        s->sinv[i] = sinf((float)i * 0.1f);
    }
    for (i = 0; i < HEADS * HD; i++) {
        s->q8[i] = (int8_t)(i * 40503u >> 9);
        s->att[i] = (float)(i % 17) * 0.1f - 0.8f;
    }
    for (i = 0; i < DOT_N; i++) {
        s->da[i] = (int8_t)(i * 97u);
        s->db[i] = (int8_t)(i * 89u + 3u);
    }
    /* a warm-up call, then REPS: make a9-model counts REPS = 2 less REPS = 1 */
    for (r = 0; r <= reps; r++) {
        if (!strcmp(argv[1], "small")) {
            wu_small_ops(s, 1 + r);
            sink += (int32_t)s->h[r % HID];
        } else if (!strcmp(argv[1], "attention")) {
            wu_attention(s, layers);
            sink += (int32_t)s->att[r % HID];
            macs = (uint64_t)layers * HEADS * CTX * HD * 2;
        } else {
            wu_dot(s);
            sink += s->dot;
            macs = (uint64_t)DOT_REPS * DOT_N;
        }
    }
    printf("%s macs %llu sink %d\n", argv[1], (unsigned long long)macs, (int)sink);
    free(s->emb);
    free(s->kc);
    free(s->vc);
    free(s);
    return 0;
}
