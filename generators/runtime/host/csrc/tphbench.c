/* tphbench: the C decoder step (tphloop.c) on the replay device (tphreplay.c), no Python,
 * for `make host-bench` (callgrind on x86-64, qemu-arm for ARMv7) and the loop's ARMv7 test.
 *
 *     tphbench DUMP TOKENS [growth] [out=FILE] [threads=N]
 *
 * DUMP is written by generators.runtime.engines.replay.write_dump: the loop's table, the frames,
 * kv and results regions (placed in a DDR span at their physical offsets; the CPU reads the
 * results region through its own cached copy, stale until the loop's invalidates refresh its
 * lines: tph_replay_cache, tph_replay_sync), the embedding row of the
 * token, norms, row scales, RoPE tables, KV steps and lengths, the recorded engine words of
 * one sampled token per port, and the position. The program runs one warm-up step (which
 * also starts the four channels: the state says the chains are elsewhere), then TOKENS
 * steps at that position (the KV lengths set back before each: the same work every time;
 * "growth": the running absmax (the table's KV_FIXED word cleared: the rule of a model
 * without calibrated steps) and layer 0 KV head 0's K step set tiny before each step, so
 * every step requantises that head's cached rows once), each followed by greedy sampling (tph_loop_argmax: the sampling
 * part; bench_token: what callgrind's --toggle-collect counts, the warm-up outside it). It
 * prints the time per step on this machine, the argmax, the last step's KV bytes
 * requantised and values clipped, and its invalidates of the results region (calls, bytes
 * invalidated, bytes read); out=FILE writes the last step's
 * logits (float32, raw). threads=2 starts the context's worker thread (tph_threads: the LM
 * head's dequantisation and the argmax by halves on two cores); threads=1, the default, the
 * same halves one after the other on this thread (what make host-bench and make a9-model
 * count: the two-core time is modelled from the halves, docs/runtime.md section 9).
 *
 * A dump of B > 1 rows (write_dump(..., tokens=[t0, t1, ...]): the embedding rows of the B
 * tokens, the engine words of one B-row pass) runs tph_step_rows instead: B rows of stream 0
 * at positions pos .. pos + B - 1, each with its logits and greedy sampling (a batched decode
 * step: several streams' or speculation's rows); out=FILE then writes every row's logits.
 * A dump written with logits=False runs its steps without the LM head and sampling (prompt
 * rows); out=FILE then writes nothing.
 */
#define _POSIX_C_SOURCE 200112L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tphloop.h"

#define DUMP_MAGIC "TPLDUMP1"
#define NAME_BYTES 16

typedef struct {
    uint8_t *data;
    uint32_t sections;
    const uint8_t *dir;
} dump_t;

static void die(const char *what)
{
    fprintf(stderr, "tphbench: %s\n", what);
    exit(2);
}

static uint32_t u32at(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* a section: its bytes and arg (a DDR offset for frames and kv), or die */
static uint8_t *section(const dump_t *d, const char *name, uint32_t *bytes, uint32_t *arg)
{
    uint32_t i;
    for (i = 0; i < d->sections; i++) {
        const uint8_t *e = d->dir + i * (NAME_BYTES + 16);
        if (!strncmp((const char *)e, name, NAME_BYTES)) {
            if (bytes)
                *bytes = u32at(e + NAME_BYTES + 4);
            if (arg)
                *arg = u32at(e + NAME_BYTES + 8);
            return d->data + u32at(e + NAME_BYTES);
        }
    }
    fprintf(stderr, "tphbench: the dump has no section %s\n", name);
    exit(2);
}

static void load(dump_t *d, const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    if (!f)
        die("cannot open the dump");
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 12 || fseek(f, 0, SEEK_SET))
        die("cannot read the dump");
    d->data = malloc((size_t)n);
    if (!d->data || fread(d->data, 1, (size_t)n, f) != (size_t)n)
        die("cannot read the dump");
    fclose(f);
    if (memcmp(d->data, DUMP_MAGIC, 8))
        die("not a tph dump");
    d->sections = u32at(d->data + 8);
    d->dir = d->data + 12;
}

/* one step's host work: the step (B = 0: tph_step; else tph_step_rows of B rows) and greedy
 * sampling of every row (the worker sleeps after the last row's) */
__attribute__((noinline)) int32_t bench_token(void *ctx, tph_row *rows, uint32_t B,
                                              uint32_t pos, uint32_t lm, const float *logits,
                                              uint32_t vocab, int32_t *best)
{
    uint32_t j;
    int32_t rc = B ? tph_step_rows(ctx, rows, B) : tph_step(ctx, 0, pos, lm);
    const uint32_t n = B ? B : 1u;
    for (j = 0; lm && rc == TPH_OK && j < n; j++)
        *best = tph_loop_argmax(ctx, logits + j * vocab, vocab, j + 1u == n);
    return rc;
}

int main(int argc, char **argv)
{
    dump_t d;
    tph_replay dev;
    tph_io io;
    void *ptrs[TPH_P_COUNT], *ctx = NULL;
    uint32_t nb, arg, tb, i, j, l, tokens, growth = 0, pos, vocab, layers, kvh, ddr_size, phys_base;
    uint32_t B, mb, lm, threads = 1;
    tph_row rows[TPH_MAX_VECTORS];
    uint32_t *table, *meta, stats_[TPH_STATS], err[TPH_ERR_WORDS];
    const char *out = NULL;
    uint8_t *ddr, *p, *cpu;
    int64_t *length;
    int32_t *xstate;
    float *logits, *kstep;
    int32_t rc, best = -1;
    struct timespec t0, t1;
    double ns;
    if (argc < 3)
        die("usage: tphbench DUMP TOKENS [growth] [out=FILE] [threads=N]");
    for (i = 3; i < (uint32_t)argc; i++) {
        if (!strcmp(argv[i], "growth"))
            growth = 1;
        else if (!strncmp(argv[i], "out=", 4))
            out = argv[i] + 4;
        else if (!strncmp(argv[i], "threads=", 8))
            threads = (uint32_t)strtoul(argv[i] + 8, NULL, 10);
        else
            die("usage: tphbench DUMP TOKENS [growth] [out=FILE] [threads=N]");
    }
    tokens = (uint32_t)strtoul(argv[2], NULL, 10);
    load(&d, argv[1]);
    meta = (uint32_t *)section(&d, "meta", &mb, NULL);
    ddr_size = meta[0];
    phys_base = meta[1];
    pos = meta[2];
    B = mb >= 20u ? meta[4] : 0u;         /* rows of a batched dump (0: one tph_step) */
    lm = mb >= 24u ? meta[5] != 0u : 1u;  /* the LM head and sampling (0: prompt rows) */
    if (B > TPH_MAX_VECTORS)
        die("too many rows in the dump");
    table = (uint32_t *)section(&d, "table", &tb, NULL);
    vocab = table[TPH_T_VOCAB];
    layers = table[TPH_T_LAYERS];
    kvh = table[TPH_T_KV_HEADS];
    if (growth)                           /* the running absmax: what "growth" measures */
        table[TPH_T_KV_FIXED] = 0;
    ddr = calloc(ddr_size, 1);
    logits = malloc((B ? B : 1u) * vocab * sizeof *logits);
    xstate = calloc(3u * table[TPH_T_N_XFER], sizeof *xstate);   /* one-vector frames */
    if (!ddr || !logits || !xstate)
        die("out of memory");
    p = section(&d, "frames", &nb, &arg);
    memcpy(ddr + arg, p, nb);
    memset(ptrs, 0, sizeof ptrs);
    ptrs[TPH_P_FRAMES] = ddr + arg;
    p = section(&d, "kv", &nb, &arg);
    memcpy(ddr + arg, p, nb);
    ptrs[TPH_P_KV] = ddr + arg;
    p = section(&d, "results", &nb, &arg);
    memcpy(ddr + arg, p, nb);
    cpu = malloc(nb);                     /* the CPU's cached copy: stale (garbage) lines */
    if (!cpu)
        die("out of memory");
    memset(cpu, 0xA5, nb);
    ptrs[TPH_P_RESULTS] = cpu;
    ptrs[TPH_P_EMBED] = section(&d, "embed", NULL, NULL);
    ptrs[TPH_P_NORMS] = section(&d, "norms", NULL, NULL);
    ptrs[TPH_P_SCALES] = section(&d, "scales", NULL, NULL);
    ptrs[TPH_P_COS] = section(&d, "cos", NULL, NULL);
    ptrs[TPH_P_SIN] = section(&d, "sin", NULL, NULL);
    ptrs[TPH_P_KSTEP] = kstep = (float *)section(&d, "kstep", NULL, NULL);
    ptrs[TPH_P_VSTEP] = section(&d, "vstep", NULL, NULL);
    ptrs[TPH_P_LENGTH] = length = (int64_t *)section(&d, "length", NULL, NULL);
    ptrs[TPH_P_STATE] = section(&d, "state", NULL, NULL);
    ptrs[TPH_P_STATS] = stats_;
    ptrs[TPH_P_ERR] = err;
    ptrs[TPH_P_LOGITS] = logits;
    ptrs[TPH_P_XSTATE] = xstate;
    for (i = 0; i < table[TPH_T_N_XFER]; i++)
        xstate[i] = 1;
    tph_replay_init(&dev, ddr, phys_base, ddr_size);
    tph_replay_cache(&dev, cpu, phys_base + arg, nb);
    for (i = 0; i < 2; i++) {
        char pk[NAME_BYTES], ps[NAME_BYTES];
        uint32_t frames;
        snprintf(pk, sizeof pk, "pk%u", (unsigned)i);
        snprintf(ps, sizeof ps, "ps%u", (unsigned)i);
        section(&d, ps, &frames, NULL);
        tph_replay_record(&dev, i, (const uint32_t *)section(&d, pk, NULL, NULL),
                          (const uint32_t *)section(&d, ps, NULL, NULL), frames / 4 - 1);
    }
    memset(&io, 0, sizeof io);
    io.ctx = &dev;
    io.read = tph_replay_read;
    io.write = tph_replay_write;
    io.sync = tph_replay_sync;
    io.sync_handle = &dev;
    nb = tph_ctx_bytes(table, tb / 4);
    if (!nb || posix_memalign(&ctx, 16, nb))
        die("the table is refused, or out of memory");
    if ((rc = tph_init(ctx, nb, table, tb / 4, ptrs, &io)))
        die("tph_init refused the dump");
    threads = tph_threads(ctx, threads, 30000u);   /* cloop.SPIN_US */
    memset(rows, 0, sizeof rows);
    for (j = 0; j < B; j++) {
        rows[j].token = j;                /* the dump's embedding rows, in order */
        rows[j].pos = pos + j;
        rows[j].logits = lm;
        rows[j].k_step = kstep;
        rows[j].v_step = (float *)ptrs[TPH_P_VSTEP];
        rows[j].length = length;
        rows[j].out = logits + j * vocab;
    }
    for (i = 0; i <= tokens; i++) {       /* step 0: the warm-up (and the channels' start) */
        if (i == 1)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        for (l = 0; l < layers; l++)
            length[l] = pos;
        if (growth)
            kstep[0] = 1e-30f;
        rc = i ? bench_token(ctx, rows, B, pos, lm, logits, vocab, &best)
               : B ? tph_step_rows(ctx, rows, B) : tph_step(ctx, 0, pos, lm);
        if (rc) {
            fprintf(stderr, "tphbench: step %u failed: code %d (record %u %u %u %u %u %u)\n",
                    (unsigned)i, (int)rc, (unsigned)err[0], (unsigned)err[1], (unsigned)err[2],
                    (unsigned)err[3], (unsigned)err[4], (unsigned)err[5]);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ns = tokens ? ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec))
                  / tokens : 0.0;
    if (out && lm) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(logits, sizeof *logits, (B ? B : 1u) * vocab, f) != (B ? B : 1u) * vocab
            || fclose(f))
            die("cannot write the logits");
    }
    printf("tokens %u rows %u lm %u threads %u position %u ns_per_token %.0f argmax %d retries %u "
           "transfers %u reads %u writes %u kv_heads %u device_errors %u requant %u clipped %u "
           "invalidates %u invalidated %u read_cached %u\n",
           (unsigned)tokens, (unsigned)(B ? B : 1u), (unsigned)lm, (unsigned)threads,
           (unsigned)pos, ns, (int)best, (unsigned)stats_[TPH_C_RETRIES],
           (unsigned)stats_[TPH_C_TRANSFERS],
           (unsigned)(stats_[TPH_C_READS0] + stats_[TPH_C_READS1]),
           (unsigned)(stats_[TPH_C_WRITES0] + stats_[TPH_C_WRITES1]), (unsigned)kvh,
           (unsigned)dev.errors, (unsigned)stats_[TPH_C_REQUANT],
           (unsigned)stats_[TPH_C_CLIPPED], (unsigned)stats_[TPH_C_INVALIDATES],
           (unsigned)stats_[TPH_C_INVALIDATED], (unsigned)stats_[TPH_C_READ_CACHED]);
    tph_free(ctx);
    free(ctx);
    free(ddr);
    free(cpu);
    free(logits);
    free(xstate);
    free(d.data);
    return 0;
}
