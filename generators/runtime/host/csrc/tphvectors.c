/* tphvectors: run every case of a vector file (generators/runtime/host/vectors.py: inputs and
 * the numpy reference's outputs) through tphost and compare every output bit.
 *
 *     tphvectors FILE.tpv        -> one line per kernel, exit 1 on any mismatch
 *
 * Built natively and for ARMv7 (arm-linux-gnueabihf-gcc, run under qemu-arm) by
 * tests/runtime/host/test_hostops.py; on the board with its own gcc (with tphwork.c and
 * -pthread). Every argmax case runs three times: tph_argmax, the C loop's argmax by halves
 * (tphwork.h tph_argmax_halves) on a worker thread, and its one-thread fallback.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tphost.h"
#include "tphwork.h"

#define MAX_ARRAYS 12

typedef struct {
    uint32_t dtype, count, size;   /* size: bytes per element */
    void *data;                    /* malloc'd, aligned copy */
} array_t;

typedef struct {
    char name[17];
    uint32_t cases, words, mismatches;
} tally_t;

static const uint32_t dtype_size[] = {0, 4, 4, 4, 1, 1, 2, 8, 2};

static int read_u32(FILE *f, uint32_t *v)
{
    uint8_t b[4];
    if (fread(b, 1, 4, f) != 4)
        return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int read_array(FILE *f, array_t *a)
{
    size_t bytes;
    if (read_u32(f, &a->dtype) || read_u32(f, &a->count) || a->dtype == 0 || a->dtype > 8)
        return -1;
    a->size = dtype_size[a->dtype];
    bytes = (size_t)a->count * a->size;
    a->data = malloc(bytes ? bytes : 1);
    if (!a->data || fread(a->data, 1, bytes, f) != bytes)
        return -1;
    return 0;   /* the file is little-endian, as both targets are */
}

/* compare out (computed) with the expected array e, element by element, as bits */
static uint32_t compare(const void *out, const array_t *e, const char *kernel, uint32_t ncase,
                        const char *what, uint32_t *words)
{
    uint32_t i, bad = 0;
    for (i = 0; i < e->count; i++) {
        const uint8_t *p = (const uint8_t *)out + (size_t)i * e->size;
        const uint8_t *q = (const uint8_t *)e->data + (size_t)i * e->size;
        if (memcmp(p, q, e->size)) {
            if (bad < 3) {
                uint64_t a = 0, b = 0;
                memcpy(&a, p, e->size);
                memcpy(&b, q, e->size);
                fprintf(stderr, "MISMATCH %s case %u %s[%u]: got 0x%llx, numpy 0x%llx\n",
                        kernel, ncase, what, i, (unsigned long long)a, (unsigned long long)b);
            }
            bad++;
        }
    }
    *words += e->count;
    return bad;
}

#define F(k) ((float *)a[k].data)
#define U(k) ((uint32_t *)a[k].data)
#define N(k) (a[k].count)

/* run one case; returns the mismatching elements, or -1 on a malformed case */
/* work[0]: a worker with its thread, work[1]: the serial fallback */
static long run_case(const char *k, array_t *a, uint32_t na, uint32_t ncase, uint32_t *words,
                     void *const *work)
{
    long bad = 0;
    int32_t rc = 0;
    void *o1 = NULL, *o2 = NULL;
    /* outputs: the expected arrays' shapes, allocated here */
#define OUT(p, idx) do { p = calloc(a[idx].count ? a[idx].count : 1, a[idx].size); \
                         if (!p) return -1; } while (0)
#define CMP(p, idx, what) (bad += compare(p, &a[idx], k, ncase, what, words))
#define CMP_RC(idx) \
    do { int32_t r_ = rc; bad += compare(&r_, &a[idx], k, ncase, "rc", words); } while (0)
    if (!strcmp(k, "sumsq") && na == 2) {
        float s = tph_sumsq(F(0), N(0));
        CMP(&s, 1, "sum");
    } else if (!strcmp(k, "absmax") && na == 3) {
        float m = 0.0f;
        rc = tph_absmax(F(0), N(0), &m);
        CMP_RC(1);
        CMP(&m, 2, "amax");
    } else if (!strcmp(k, "argmax") && na == 2) {
        int32_t i = tph_argmax(F(0), N(0));
        CMP(&i, 1, "index");
        i = tph_argmax_halves(work[0], F(0), N(0), 0u);
        CMP(&i, 1, "index by halves (2 threads)");
        i = tph_argmax_halves(work[1], F(0), N(0), 1u);
        CMP(&i, 1, "index (1 thread)");
    } else if (!strcmp(k, "rmsnorm") && na == 4) {
        OUT(o1, 3);
        tph_rmsnorm(F(0), F(1), N(0), F(2)[0], (float *)o1);
        CMP(o1, 3, "y");
    } else if (!strcmp(k, "rope") && na == 5) {
        OUT(o1, 4);
        tph_rope(F(0), U(1)[0], U(1)[1], F(2), F(3), (float *)o1);
        CMP(o1, 4, "y");
    } else if (!strcmp(k, "exp") && na == 2) {
        OUT(o1, 1);
        tph_exp(F(0), N(0), (float *)o1);
        CMP(o1, 1, "y");
    } else if (!strcmp(k, "silu_mul") && na == 3) {
        OUT(o1, 2);
        tph_silu_mul(F(0), F(1), N(0), (float *)o1);
        CMP(o1, 2, "y");
    } else if (!strcmp(k, "add") && na == 3) {
        OUT(o1, 2);
        tph_add(F(0), F(1), N(0), (float *)o1);
        CMP(o1, 2, "y");
    } else if (!strcmp(k, "quantise_rows") && na == 5) {
        OUT(o1, 3);
        OUT(o2, 4);
        rc = tph_quantise_rows(F(0), U(1)[0], U(1)[1], (int8_t *)o1, (float *)o2);
        CMP_RC(2);
        if (rc == TPH_OK) {
            CMP(o1, 3, "q");
            CMP(o2, 4, "s");
        }
    } else if (!strcmp(k, "dequant_i32") && na == 4) {
        OUT(o1, 3);
        tph_dequant_i32((const int32_t *)a[0].data, F(1), N(0), F(2)[0], (float *)o1);
        CMP(o1, 3, "y");
    } else if (!strcmp(k, "dequant_f32") && na == 3) {
        OUT(o1, 2);
        tph_dequant_f32(F(0), N(0), F(1)[0], (float *)o1);
        CMP(o1, 2, "y");
    } else if (!strcmp(k, "dequant_b_i32") && na == 4 && N(2) && N(2) <= 256u
               && N(0) == N(1) * N(2)) {
        float *y[256];
        uint32_t j;
        OUT(o1, 3);
        for (j = 0; j < N(2); j++)
            y[j] = (float *)o1 + j * N(1);
        tph_dequant_b_i32((const int32_t *)a[0].data, F(1), N(1), N(2), F(2), y);
        CMP(o1, 3, "y");
    } else if (!strcmp(k, "dequant_b_f32") && na == 3 && N(1) && N(1) <= 256u
               && N(0) % N(1) == 0) {
        float *y[256];
        uint32_t j;
        OUT(o1, 2);
        for (j = 0; j < N(1); j++)
            y[j] = (float *)o1 + j * (N(0) / N(1));
        tph_dequant_b_f32(F(0), N(0) / N(1), N(1), F(1), y);
        CMP(o1, 2, "y");
    } else if (!strcmp(k, "kv_step") && na == 5) {
        float step = F(1)[0], ratio = 0.0f;
        rc = tph_kv_step(F(0), N(0), &step, &ratio);
        CMP_RC(2);
        CMP(&step, 3, "step");
        CMP(&ratio, 4, "ratio");
    } else if (!strcmp(k, "kv_requantise") && na == 4) {
        rc = tph_kv_requantise((int8_t *)a[0].data, N(0), F(1)[0]);
        CMP_RC(2);
        CMP(a[0].data, 3, "q");        /* in place (untouched on an error) */
    } else if (!strcmp(k, "kv_row") && na == 3) {
        OUT(o1, 2);
        tph_kv_row(F(0), N(0), F(1)[0], (int8_t *)o1);
        CMP(o1, 2, "q");
    } else if (!strcmp(k, "kv_row16") && na == 3) {
        OUT(o1, 2);
        tph_kv_row16(F(0), N(0), F(1)[0], (int16_t *)o1);
        CMP(o1, 2, "q");
    } else if (!strcmp(k, "kv_append") && na == 7) {
        float step = F(2)[0];
        rc = tph_kv_append((int8_t *)a[0].data, U(1)[0], U(1)[1], &step, F(3));
        CMP_RC(4);
        CMP(a[0].data, 5, "rows");     /* written in place (untouched on an error) */
        CMP(&step, 6, "step");
    } else if (!strcmp(k, "score_mult") && na == 5) {
        uint32_t m = 0, s = 0;
        double c;
        memcpy(&c, a[0].data, 8);
        rc = tph_score_multiplier(c, U(1)[0], U(1)[1], U(1)[2], &m, &s);
        CMP_RC(2);
        CMP(&m, 3, "mult");
        CMP(&s, 4, "shift");
    } else if (!strcmp(k, "score_scale") && na == 4) {
        double c = tph_score_scale(F(0)[0], F(1)[0], U(2)[0]);
        CMP(&c, 3, "c");
    } else if (!strcmp(k, "attention_out") && na == 5) {
        OUT(o1, 4);
        tph_attention_out((const int8_t *)a[0].data, U(1), U(2)[0], U(2)[1], U(2)[2], F(3)[0],
                          (float *)o1);
        CMP(o1, 4, "o");
    } else if (!strcmp(k, "f16_to_f32") && na == 2) {
        OUT(o1, 1);
        tph_f16_to_f32((const uint16_t *)a[0].data, N(0), (float *)o1);
        CMP(o1, 1, "y");
    } else if (!strcmp(k, "embed_q8_0") && na == 3) {
        OUT(o1, 2);
        tph_embed_q8_0((const uint8_t *)a[0].data, U(1)[0], (float *)o1);
        CMP(o1, 2, "y");
    } else if (!strcmp(k, "f32_to_f16") && na == 2) {
        OUT(o1, 1);
        tph_f32_to_f16(F(0), N(0), (uint16_t *)o1);
        CMP(o1, 1, "h");
    } else if (!strcmp(k, "quantise_q8_0") && na == 4) {
        OUT(o1, 2);
        OUT(o2, 3);
        rc = tph_quantise_q8_0(F(0), N(0), (int8_t *)o1, (uint16_t *)o2);
        CMP_RC(1);
        if (rc == TPH_OK) {
            CMP(o1, 2, "q");
            CMP(o2, 3, "d");
        }
    } else if (!strcmp(k, "quantise_q8_1") && na == 5) {
        void *o3;
        OUT(o1, 2);
        OUT(o2, 3);
        OUT(o3, 4);
        rc = tph_quantise_q8_1(F(0), N(0), (int8_t *)o1, (uint16_t *)o2, (uint16_t *)o3);
        CMP_RC(1);
        if (rc == TPH_OK) {
            CMP(o1, 2, "q");
            CMP(o2, 3, "d");
            CMP(o3, 4, "s");
        }
        free(o3);
    } else if ((!strcmp(k, "quant_parts_q8_0") && na == 4)
               || (!strcmp(k, "quant_parts_q8_1") && na == 5)) {
        /* (q, d, s): x's blocks', then its residual's */
        const uint32_t n = N(0), q81 = na == 5;
        void *o3 = NULL;
        OUT(o1, 2);
        OUT(o2, 3);
        if (q81)
            OUT(o3, 4);
        rc = tph_quantise_parts(F(0), n, (int8_t *)o1, (uint16_t *)o2, (uint16_t *)o3,
                                (int8_t *)o1 + n, (uint16_t *)o2 + n / 32u,
                                q81 ? (uint16_t *)o3 + n / 32u : NULL);
        CMP_RC(1);
        if (rc == TPH_OK) {
            CMP(o1, 2, "q");
            CMP(o2, 3, "d");
            if (q81)
                CMP(o3, 4, "s");
        }
        free(o3);
    } else if (!strcmp(k, "embed_int8") && na == 3) {
        OUT(o1, 2);
        tph_embed_int8((const int8_t *)a[0].data, N(0), F(1)[0], (float *)o1);
        CMP(o1, 2, "y");
    } else {
        fprintf(stderr, "unknown kernel or array count: %s (%u arrays)\n", k, na);
        bad = -1;
    }
    free(o1);
    free(o2);
    return bad;
}

int main(int argc, char **argv)
{
    FILE *f;
    uint8_t magic[4];
    uint32_t ncases, c, i, total_bad = 0, total_words = 0, ntally = 0, threads;
    tally_t tally[32];
    uint8_t *mem[2];
    void *work[2];
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE.tpv\n", argv[0]);
        return 2;
    }
    for (i = 0; i < 2; i++) {       /* the workers' memory, 64-byte aligned */
        mem[i] = malloc(tph_worker_bytes() + 64u);
        if (!mem[i])
            return 2;
        work[i] = mem[i] + (64u - (uint32_t)((uintptr_t)mem[i] & 63u)) % 64u;
    }
    threads = tph_worker_start(work[0], 2u, 20000u);
    if (tph_worker_start(work[1], 1u, 0u) != 1u)
        return 2;
    f = fopen(argv[1], "rb");
    if (!f || fread(magic, 1, 4, f) != 4 || memcmp(magic, "TPV1", 4) || read_u32(f, &ncases)) {
        fprintf(stderr, "%s: not a tphost vector file\n", argv[1]);
        return 2;
    }
    memset(tally, 0, sizeof tally);
    for (c = 0; c < ncases; c++) {
        char name[17];
        array_t a[MAX_ARRAYS];
        uint32_t na, words = 0;
        long bad;
        tally_t *t = NULL;
        name[16] = 0;
        if (fread(name, 1, 16, f) != 16 || read_u32(f, &na) || na > MAX_ARRAYS) {
            fprintf(stderr, "case %u: truncated\n", c);
            return 2;
        }
        memset(a, 0, sizeof a);
        for (i = 0; i < na; i++)
            if (read_array(f, &a[i])) {
                fprintf(stderr, "case %u (%s): array %u truncated\n", c, name, i);
                return 2;
            }
        bad = run_case(name, a, na, c, &words, work);
        for (i = 0; i < na; i++)
            free(a[i].data);
        if (bad < 0)
            return 2;
        for (i = 0; i < ntally; i++)
            if (!strcmp(tally[i].name, name))
                t = &tally[i];
        if (!t) {
            if (ntally == 32)
                return 2;
            t = &tally[ntally++];
            memcpy(t->name, name, sizeof t->name);
        }
        t->cases++;
        t->words += words;
        t->mismatches += (uint32_t)bad;
        total_bad += (uint32_t)bad;
        total_words += words;
    }
    fclose(f);
    tph_worker_stop(work[0]);
    free(mem[0]);
    free(mem[1]);
    for (i = 0; i < ntally; i++)
        printf("%-14s %5u cases %9u words %6u mismatches\n", tally[i].name, tally[i].cases,
               tally[i].words, tally[i].mismatches);
    printf("total %u cases, %u words, %u mismatches (%u-bit pointers, %s bodies, argmax by "
           "halves on %u threads)\n", ncases, total_words, total_bad,
           (unsigned)(8 * sizeof(void *)), tph_build(), (unsigned)threads);
    return total_bad ? 1 : 0;
}
