/* tphloop: the decoder's per-token step in C (docs/runtime.md section 4.3, "The host loop").
 *
 * One call, tph_step, runs one position of the decoder exactly as generators/runtime/decode/decoder.py
 * does on the runtime of generators/runtime/engines/runtime.py (the reference, which stays); one call
 * of tph_step_rows runs B positions in one weight pass, as Decoder.step_rows does (B-vector
 * matrix frames, an attention transfer per row over its own stream's cache; docs/runtime.md
 * 4.7). A step is: the
 * embedding row, per layer RMSNorm, the activation quantised straight into its x slot, the
 * q+k+v transfer, RoPE, the KV append into the DMA memory's cache (both port halves), the
 * attention header+q parts, the attention transfer, o, the residual, RMSNorm, gate+up, SiLU*up,
 * down, the residual; then the LM head where a token is sampled. Every small op is a tphost.h
 * kernel called through its API. Every transfer is the runtime's: the STATUS words of its
 * descriptors cleared, TAILDESC written per channel (S2MM first), DMASR polled until Idle with
 * the last descriptor's Cmplt (or an error bit, a halted channel, the timeout), every
 * descriptor checked (Cmplt without error bits, an MM2S one's whole length, an S2MM one's
 * RXEOF), every engine status word checked (flags, count, tag). A DMA fault is handled here
 * as the Python runtime does: both DMAs reset, the PL reset (a callback), the four channels
 * started where the chains stand, the transfer run once more; a second fault ends the step
 * with the two faults recorded for the caller to raise.
 *
 * What the loop needs is handed in, never computed here: a table of uint32 words (the
 * dimensions, the memory plan's offsets, every transfer's descriptors, tails, result slots
 * and chain links: generators/runtime/engines/cloop.py builds it from the runtime's own chains),
 * an array of pointers (DMA memory, the model's arrays, the decoder's KV steps, the shared
 * state, counters and error words), and a register interface (tph_io): the DMAs' mapped
 * register pages for direct volatile access (the board: PYNQ's MMIO array), or callbacks
 * (the register models of golden, rtl and the tests; the replay device below), and the
 * cached results region's invalidate by range (tph_io.sync). C99, stdint, no globals, no
 * allocation (the caller gives the context's memory: tph_ctx_bytes); one thread besides the
 * caller's when asked (tph_threads: the second core's half of the LM head and of the argmax).
 */
#ifndef TPHLOOP_H
#define TPHLOOP_H

#include <stddef.h>
#include <stdint.h>

#include "tphost.h"                 /* TPH_OK, the small ops */

#ifdef __cplusplus
extern "C" {
#endif

/* bumped when the table layout, a pointer slot or a signature changes (the loader checks) */
#define TPH_LOOP_ABI 9
#define TPH_TABLE_MAGIC 0x54504C31u      /* "TPL1" */
#define TPH_NONE 0xFFFFFFFFu             /* a field with no value (the LM head's layer) */
#define TPH_MAX_VECTORS 16               /* the most rows of one tph_step_rows call (the
                                            matrix engines' largest vectors, mv_common) */
#define TPH_LINE 32u                     /* the Cortex-A9's L1 and the PL310's cache line:
                                            an invalidate covers whole lines */
#define TPH_SYNC_FROM_DEVICE 1           /* XRT's XCL_BO_SYNC_BO_FROM_DEVICE */

/* the cached results region's invalidate by range: XRT's xclSyncBO(handle, bo, direction,
 * size, offset) has this signature (xclBufferHandle an unsigned int, the direction an enum,
 * 0 or a negative errno back), so on the board it is libxrt_core's own function */
typedef int32_t (*tph_sync_fn)(void *handle, uint32_t bo, int32_t direction, size_t size,
                               size_t offset);

/* ---- the register interface: direct access when regs[dma] is set, else the callbacks.
 * A callback returns 0, or nonzero when it failed (the caller keeps the reason: the step
 * ends with TPH_E_IO). */
typedef struct tph_io {
    void *ctx;
    int32_t (*read)(void *ctx, uint32_t dma, uint32_t offset, uint32_t *value);
    int32_t (*write)(void *ctx, uint32_t dma, uint32_t offset, uint32_t value);
    int32_t (*pl_reset)(void *ctx);                              /* may be NULL */
    int32_t (*hook)(void *ctx, uint32_t transfer, uint32_t done); /* may be NULL */
    /* may be NULL: called before the cached rows of (K 0 / V 1, layer, KV head) are
     * requantised in a row that asks for it (tph_row.kv_rows set: a pass that may be taken
     * back, KVCache.begin_undo keeps those rows first) */
    int32_t (*kv_save)(void *ctx, uint32_t which, uint32_t layer, uint32_t head);
    volatile uint32_t *regs[2];
    /* never NULL: before the CPU reads the words an S2MM descriptor wrote into the results
     * region (after the transfer's completion is seen), sync(sync_handle, sync_bo,
     * TPH_SYNC_FROM_DEVICE, bytes, sync_offset + offset) with exactly those words' whole lines
     * (the region is cached; its slots start on lines): the board's xclSyncBO (the kernel's
     * dma_sync_single_for_cpu: the lines invalidated in L1 and the PL310), the replay
     * device's tph_replay_sync, or a callback into a DDR model; nonzero: the step ends with
     * TPH_E_SYNC */
    tph_sync_fn sync;
    void *sync_handle;
    uint32_t sync_bo;         /* the results region's buffer object */
    uint32_t sync_offset;     /* the results region's offset inside it */
} tph_io;

/* ---- the table's header (word indices) */
enum {
    TPH_T_MAGIC, TPH_T_WORDS,
    TPH_T_LAYERS, TPH_T_HIDDEN, TPH_T_MLP, TPH_T_HEADS, TPH_T_KV_HEADS, TPH_T_HEAD_DIM,
    TPH_T_VOCAB, TPH_T_EPS,            /* float32 bits */
    TPH_T_CONTEXT,                     /* positions of the KV cache (the plan's) */
    TPH_T_KV_ROW,                      /* bytes of one position's K (or V) row on one port */
    TPH_T_EMBED_ROWS, TPH_T_EMBED_STRIDE,   /* Q8_0 rows of the embedding, bytes per row */
    TPH_T_ROPE_F64,                    /* 1: cos/sin tables are double, 0: float */
    TPH_T_HDR_BYTES,                   /* attention header block (header word, scale words,
                                          padding to a 16-byte beat) */
    TPH_T_PART0, TPH_T_PART1,          /* bytes of the header+q part slot per port */
    TPH_T_ATT_WORDS,                   /* attention result words before the status word */
    TPH_T_FRAC_BITS, TPH_T_SPO, TPH_T_MAX_SHIFT, TPH_T_MULT_BITS,
    TPH_T_N_XFER,                      /* transfers of the plan */
    TPH_T_XFER_OFF,                    /* -> N_XFER words: each transfer's record offset */
    TPH_T_KIND_OFF,                    /* -> LAYERS * 5 + 1 transfer indices (layer-major:
                                          qkv, att, o, gate_up, down; then the LM head) */
    TPH_T_XSLOT_OFF,                   /* -> 5 byte offsets in frames: x slots of qkv, o,
                                          gate_up, down, lm_head */
    TPH_T_PART_OFF,                    /* -> KV_HEADS x 2 byte offsets of the part slots */
    TPH_T_KVCTRL_OFF, TPH_T_KVCTRL_N,  /* -> N words: CONTROL word index | TXEOF flag << 31
                                          of every K/V descriptor */
    TPH_T_SWITCH_OFF,                  /* -> 4 x (NXTDESC word index, LM head address or
                                          TPH_NONE, layer 0 address): the LM head switch */
    TPH_T_SEQ0_OFF,                    /* -> 4: each channel's first transfer */
    TPH_T_TRACE_WORDS,                 /* words of the trace buffer (every result slot) */
    TPH_T_TRACE_OUTS,                  /* result slots of a token (trace_n entries) */
    TPH_T_FRAMES_BYTES,                /* bytes of the frames region (every index checked) */
    TPH_T_KV_BYTES,                    /* bytes of the kv region */
    TPH_T_KV_FIXED,                    /* 1: the KV steps are fixed (the model's calibrated
                                          ones): each row quantised with its head's step and
                                          clipped to +-127, never requantised; 0: the running
                                          absmax (tph_kv_step, requantisation) */
    TPH_T_VECTORS,                     /* the matrix engines' vectors V: the most rows of a
                                          batched step (1..TPH_MAX_VECTORS) */
    TPH_T_STREAMS,                     /* KV caches in the kv region (streams) */
    TPH_T_KV_STREAM_BYTES,             /* bytes of one stream's cache */
    TPH_T_VEC_OFF,                     /* -> N_XFER words: each transfer's B-vector record
                                          offset (0: none): its count n, then n x
                                          TPH_VEC_WORDS */
    TPH_T_ATTX_OFF,                    /* -> N_XFER words: each attention transfer's record
                                          offset (0: not one): n, n K/V CONTROL words
                                          (index | TXEOF << 31); n, n x (BUFFER word index,
                                          stream 0's address); n, n x (channel, its last
                                          descriptor's NXTDESC word index, the ring's next
                                          address, the block's first) */
    TPH_T_RESULTS_BYTES,               /* bytes of the results region (whole lines) */
    TPH_T_KV_BITS,                     /* 8 or 16: the attention engine's K and V codes
                                          (AttentionConfig.kv_bits): the cache's elements
                                          (KV_ROW = HEAD_DIM * KV_BITS / 16 bytes), the scale
                                          words' byte 3 (the KV format code, 0 or 1); 16
                                          needs fixed steps (KV_FIXED) */
    TPH_T_X_PARTS,                     /* 1 or 2: vectors per row of x in a transfer of
                                          blocks (0x05 / 0x09): 2, x's blocks and its
                                          residual's (tph_quantise_parts), each row's two
                                          words added; set before every step */
    TPH_T_HEADER = 48
};

/* a transfer's record: fixed words, then its frames, descriptors, tails and result slots */
enum {
    TPH_X_KIND, TPH_X_LAYER, TPH_X_FRAMES,
    TPH_X_DESC,                        /* descriptor blocks, S2MM channels first */
    TPH_X_TAILS, TPH_X_OUTS,
    TPH_X_FIRST,                       /* 4: the first descriptor's address per channel */
    TPH_X_NEXT_LOGITS = TPH_X_FIRST + 4,   /* 4: each channel's next transfer, LM head on */
    TPH_X_NEXT_BODY = TPH_X_NEXT_LOGITS + 4,  /* 4: the same with the LM head off */
    TPH_X_FIXED = TPH_X_NEXT_BODY + 4
};
#define TPH_FRAME_WORDS 5   /* tag, the results (TPH_RES_*), rows port 0, rows port 1,
                               the matrix's first row in the scales array */
/* a matrix frame's results (its record's second word) */
#define TPH_RES_INT32 0u    /* INT8 / ternary rows: int32 sums, a row scale and 1 / s_x */
#define TPH_RES_F32 1u      /* Q4_1 rows, format 0x04: float32 sums times 1 / s_x */
#define TPH_RES_VALUE 2u    /* Q4_1 rows, format 0x05: each float32 the row's whole value;
                               the transfer's x goes as Q8_1 blocks (codes, scale table) */
#define TPH_RES_VALUE_Q8_0 3u  /* Q8_0 rows (the LM head), format 0x09: each float32 the
                               row's whole value; x goes as Q8_0 blocks (codes, a table of
                               ceil(K/128) beats of fp16 d) */
#define TPH_MAX_BLOCKS 2048u   /* the most Q8_1 / Q8_0 blocks of one x (K <= 65535) */
#define TPH_DESC_WORDS 3    /* a channel's descriptors (consecutive, 64 bytes apart): the
                               channel, the first one's STATUS word index, how many */
#define TPH_TAIL_WORDS 3    /* channel, the last descriptor's address, its STATUS word index */
#define TPH_OUT_WORDS 6     /* frame, port, STATUS word index of its S2MM descriptor, the
                               slot's word offset in results (on a line), trace offset, trace
                               index */
#define TPH_VEC_WORDS 6     /* a matrix half of a transfer: its header descriptor's and x
                               descriptor's first word index, the image header's address, the
                               B-vector header's, the x slot's (vector 0), x bytes per vector */

/* transfer kinds (plan.KINDS, then the LM head) */
enum { TPH_QKV, TPH_ATT, TPH_O, TPH_GU, TPH_DOWN, TPH_LM, TPH_KINDS };

/* ---- pointer slots */
enum {
    TPH_P_FRAMES,      /* uint8: the frames region (descriptors, x and part slots) */
    TPH_P_KV,          /* bytes: the kv region, kv[port][K|V][layer][kv_head][position][row]
                          (int8 codes, or int16 little-endian when KV_BITS is 16) */
    TPH_P_EMBED,       /* uint8: Q8_0 embedding rows */
    TPH_P_NORMS,       /* float: (2 LAYERS + 1) x HIDDEN: input, post of each layer; final */
    TPH_P_SCALES,      /* float: every INT8 / ternary matrix's row scales */
    TPH_P_COS, TPH_P_SIN,   /* double or float: CONTEXT x HEAD_DIM / 2 */
    TPH_P_KSTEP, TPH_P_VSTEP,   /* float: LAYERS x KV_HEADS (the decoder's KVCache) */
    TPH_P_LENGTH,      /* int64: LAYERS (cached positions) */
    TPH_P_STATE,       /* int32: TPH_STATE_WORDS, shared with the Python runtime */
    TPH_P_STATS,       /* uint32: TPH_STATS, this step's counters */
    TPH_P_ERR,         /* uint32: TPH_ERR_WORDS */
    TPH_P_LOGITS,      /* float: VOCAB (the LM head's output), or NULL */
    TPH_P_TRACE,       /* uint32: TRACE_WORDS (every result word of the step), or NULL */
    TPH_P_TRACE_N,     /* uint32: TRACE_OUTS (words received per result slot), or NULL;
                          tph_step_rows: VECTORS x TRACE_WORDS and x TRACE_OUTS, row j's
                          attention words at row j's (matrix words at row 0's) */
    TPH_P_XSTATE,      /* int32: 3 x N_XFER, shared with the Python runtime: each transfer's
                          vectors B, its attention stream, 1 when it links back to itself */
    TPH_P_RESULTS,     /* uint8: the results region (every S2MM slot), mapped cached: read
                          only after io->sync of the lines read */
    TPH_P_COUNT
};

/* ---- shared state (int32) */
enum {
    TPH_S_NEXT,                        /* 4: each channel's next transfer in its chain */
    TPH_S_LINK = TPH_S_NEXT + 4,       /* the chains run the LM head: 1, not: 0, unknown: -1 */
    TPH_S_L,                           /* this token's context L */
    TPH_S_TIMEOUT_US,                  /* a transfer's deadline */
    TPH_S_RESET_TIMEOUT_US,            /* a DMA reset's and a channel start's deadline */
    TPH_STATE_WORDS
};

/* ---- counters of one step (uint32, zeroed by tph_step) */
enum {
    TPH_C_KV, TPH_C_PARTS, TPH_C_X, TPH_C_DESC, TPH_C_REQUANT,   /* CPU bytes (CPU_BYTES) */
    TPH_C_TRANSFERS, TPH_C_TAILS, TPH_C_READS0, TPH_C_READS1, TPH_C_WRITES0, TPH_C_WRITES1,
    TPH_C_RETRIES, TPH_C_GROWTHS,
    TPH_C_READ,                        /* CPU bytes read from DMA memory (CPU_BYTES "read") */
    TPH_C_CLIPPED,                     /* K/V values beyond 127 fixed steps (KVCache.clipped) */
    TPH_C_INVALIDATES,                 /* io->sync calls (DmaRuntime.cache_ops) */
    TPH_C_INVALIDATED,                 /* bytes they invalidated (whole lines) */
    TPH_C_READ_CACHED,                 /* bytes read from the results region (in TPH_C_READ) */
    TPH_STATS
};

/* ---- results and errors. tph_step returns TPH_OK or a TPH_E_* code; the error words hold
 * record 0 (the error) and the retried faults (TPH_ERR_RETRIED records from word
 * TPH_ERR_REC, their count in word TPH_ERR_NRETRIED), each TPH_REC_WORDS:
 *   code, transfer, channel (or frame), DMASR (or port), then a..h:
 *   TPH_E_DMA_*: ERRBIT/HALTED -; HANG a = other pending channels, then (channel, DMASR)
 *     pairs; DESC a = STATUS; SHORT a = bytes moved, b = length; OVER -.
 *   TPH_E_MATRIX / TPH_E_ATT: channel = frame, DMASR = port; a = TPH_W_*, b = status word,
 *     c = words received, d = rows expected; TPH_E_MATRIX e = the frame's vectors B.
 *   TPH_E_VALUE: a = TPH_V_*, b = the kernel's TPH_* code, c, d = the score scale's bits
 *     (low, high) for TPH_V_SCORE.
 *   TPH_E_RESET: a = 1: DMACR.Reset stuck (channel = dma * 2), 2: a channel stayed halted.
 *   TPH_E_ORDER: channel, a = the channel's next transfer.
 *   TPH_E_SYNC: channel = the out record's frame, DMASR = port; a = the offset in the results
 *     region, b = the bytes, c = what io->sync returned.
 * TPH_OK (0) is tphost.h's. */
enum {
    TPH_E_DMA_ERRBIT = 1, TPH_E_DMA_HALTED, TPH_E_DMA_HANG, TPH_E_DMA_DESC, TPH_E_DMA_SHORT,
    TPH_E_DMA_OVER,
    TPH_E_MATRIX = 16, TPH_E_ATT, TPH_E_VALUE, TPH_E_RESET, TPH_E_IO, TPH_E_ORDER, TPH_E_ARG,
    TPH_E_CONTEXT, TPH_E_SYNC
};
enum { TPH_W_NONE = 1, TPH_W_FLAGS, TPH_W_COUNT, TPH_W_TAG };
enum { TPH_V_QUANTISE = 1, TPH_V_KV_STEP, TPH_V_KV_REQUANT, TPH_V_SCORE,
       TPH_V_QUANTISE_Q8_1, TPH_V_QUANTISE_Q8_0 };
#define TPH_REC_WORDS 12
#define TPH_ERR_RETRIED 4
#define TPH_ERR_NRETRIED (TPH_REC_WORDS * (1 + TPH_ERR_RETRIED))
#define TPH_ERR_REC TPH_REC_WORDS
#define TPH_ERR_WORDS (TPH_ERR_NRETRIED + 1)

int32_t tph_loop_abi(void);
/* the write barrier of the loop before its TAILDESC writes (ARMv7: DSB ST), for the Python loop */
void tph_wmb(void);
/* bytes of the context (the struct and the step's vectors) for this table; 0 if it is bad */
uint32_t tph_ctx_bytes(const uint32_t *table, uint32_t words);
/* check the table and lay out the context in mem (16-byte aligned, tph_ctx_bytes long); the
 * table, the pointer array and io must outlive the context (ptrs may change between steps) */
int32_t tph_init(void *mem, uint32_t bytes, const uint32_t *table, uint32_t words,
                 void *const *ptrs, const tph_io *io);
/* one decoder position: token at position pos; logits != 0: run the LM head into
 * ptrs[TPH_P_LOGITS] (otherwise the chains skip it) */
int32_t tph_step(void *ctx, uint32_t token, uint32_t pos, uint32_t logits);

/* ---- both cores (tphwork.h; docs/runtime.md section 9, "Both cores"). tph_init lays out a
 * serial context (threads 1). tph_threads(ctx, 2, spin_us) starts the context's worker
 * thread: then the LM head's dequantisation runs port 0's results on the caller's thread and
 * port 1's on the worker (woken before the LM head's transfer, so its wake-up overlaps the
 * DMA), tph_loop_argmax takes each half of the logits on one core, and a batched pass of B rows
 * (tph_step_rows) shares its rows' small ops between transfers (RMSNorm, RoPE, residuals,
 * SiLU*up, the activations' quantisation: rows [0, (B + 1) / 2) here, the rest on the worker)
 * and every frame's results by port; every result the same bits as with threads 1. Returns the threads now running (2, or 1: threads 1, a build without
 * pthreads, or the thread not created). spin_us: how long an idle worker spins for its next
 * job before it sleeps. tph_free (= tph_threads(ctx, 1, 0)) joins the thread: call it before
 * the context's memory is freed or initialised again. */
uint32_t tph_threads(void *ctx, uint32_t threads, uint32_t spin_us);
void tph_free(void *ctx);
/* greedy sampling over both cores: numpy.argmax's index of x (tph_argmax_halves on the
 * context's worker); last != 0: the worker sleeps after it (the token's last job) */
int32_t tph_loop_argmax(void *ctx, const float *x, uint32_t n, uint32_t last);

/* ---- one row of a batched step (a position of one stream) */
typedef struct tph_row {
    uint32_t stream, token, pos, logits;   /* logits != 0: run the LM head for this row */
    float *k_step, *v_step;                /* the stream's KV steps (LAYERS x KV_HEADS) */
    int64_t *length;                       /* the stream's cached positions (LAYERS) */
    float *out;                            /* VOCAB floats: the row's logits (when logits) */
    float *kv_rows;                        /* NULL, or LAYERS x 2 x KV_HEADS x HEAD_DIM: the
                                              row's k (after RoPE) and v per layer, and
                                              io->kv_save before a requantisation */
    uint32_t kv_written, kv_requantised, kv_clipped;   /* out: this row's KV counts */
    uint32_t reserved;
} tph_row;

/* B = 1..VECTORS positions in one weight pass (Decoder.step_rows): a stream's rows take its
 * next positions in order; every matrix transfer carries the B rows as B-vector frames,
 * attention runs per row over its stream's cache, the LM head once for the rows that ask.
 * The chains are back to one-vector frames and stream 0 on return (restore_chains). */
int32_t tph_step_rows(void *ctx, tph_row *rows, uint32_t B);

/* ---- the replay device: two AXI DMAs in scatter-gather mode answering with recorded engine
 * words and no compute (make host-bench's backend). A TAILDESC write to an MM2S channel marks
 * its descriptors through the tail complete (Cmplt, their whole length); to an S2MM channel
 * fills each descriptor with the next recorded output frame of that port (RXSOF, RXEOF, the
 * bytes), cycling through the recording. DMACR (RS, Reset), DMASR (Halted, Idle), CURDESC
 * and TAILDESC as PG021; descriptors and buffers in one DDR span (phys -> ddr + phys -
 * phys_base). */
typedef struct tph_replay_ch {
    uint32_t cr, halted, curdesc, next, started;
} tph_replay_ch;

typedef struct tph_replay {
    uint8_t *ddr;
    uint32_t phys_base, size;
    uint8_t *cpu;                 /* the CPU's cached copy of [cpu_phys, cpu_phys + cpu_size)
                                     (tph_replay_cache), or NULL */
    uint32_t cpu_phys, cpu_size;
    const uint32_t *words[2];     /* per port: the recorded frames' words, back to back */
    const uint32_t *starts[2];    /* per port: packets + 1 word offsets */
    uint32_t packets[2];
    uint32_t next_packet[2];
    tph_replay_ch ch[2][2];       /* [dma][MM2S, S2MM] */
    uint32_t errors;              /* descriptors outside DDR or without length (never) */
} tph_replay;

uint32_t tph_replay_bytes(void);
void tph_replay_init(tph_replay *dev, uint8_t *ddr, uint32_t phys_base, uint32_t size);
/* port's recording: packets frames, frame k = words[starts[k] .. starts[k + 1]) */
void tph_replay_record(tph_replay *dev, uint32_t port, const uint32_t *words,
                       const uint32_t *starts, uint32_t packets);
int32_t tph_replay_read(void *dev, uint32_t dma, uint32_t offset, uint32_t *value);
int32_t tph_replay_write(void *dev, uint32_t dma, uint32_t offset, uint32_t value);
/* the CPU's data cache over one buffer the device writes (the results region at physical
 * address phys): cpu is what the CPU reads, every line cached and stale until
 * tph_replay_sync refreshes it from DDR (the model of regmodel.Memory's dma_writes buffers) */
void tph_replay_cache(tph_replay *dev, uint8_t *cpu, uint32_t phys, uint32_t size);
/* tph_sync_fn (handle: the device; bo ignored): direction TPH_SYNC_FROM_DEVICE, whole lines
 * of the cached buffer (offset from its start) copied from DDR into the CPU's copy; -1 for
 * anything else (a partial line, outside the buffer, another direction) */
int32_t tph_replay_sync(void *dev, uint32_t bo, int32_t direction, size_t size, size_t offset);

#ifdef __cplusplus
}
#endif
#endif /* TPHLOOP_H */
