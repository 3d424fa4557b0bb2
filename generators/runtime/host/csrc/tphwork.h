/* tphwork: the second core's share of the step (docs/runtime.md section 9, "Both cores").
 *
 * A worker is one thread beside the caller's: tph_worker_run(w, fn, arg, last) hands it
 * fn(arg, 1) and runs fn(arg, 0) on the calling thread, and returns when both are done (the
 * halves must be independent: disjoint outputs, shared inputs only read). The worker's memory
 * is the caller's (tph_worker_bytes, in the C loop's context: tphloop.h tph_threads); it is
 * started and joined by explicit calls (tph_worker_start, tph_worker_stop), never by a
 * global. threads = 1, a build without pthreads (TPH_NO_THREADS, or no _POSIX_THREADS), or a
 * thread that could not be created: the serial fallback, fn(arg, 0) then fn(arg, 1) on the
 * caller's thread, the same bits.
 *
 * Synchronisation, per call: spin, then block. The caller publishes the job by a release store
 * of a sequence number; the worker, spinning on it (an acquire load, `yield`/`pause` between
 * loads), starts at once; its completion is another release store, on which the caller spins
 * when it finishes its own half first. A worker that has spun spin_us microseconds without a
 * job (and at once after a job marked last) sleeps on a pthread condition variable (a futex
 * on Linux); the next job or tph_worker_wake wakes it, a system call on the caller's side.
 * tph_worker_wake is for a job that follows soon: the C loop calls it before the LM head's
 * transfer, so the worker's wake-up latency overlaps the DMA and it is spinning when the
 * logits arrive. The cost of one call with a spinning worker: the job's and the completion's
 * cache lines moved between the cores through the SCU and a mutex's uncontended lock and
 * unlock on each side (generators/runtime/bench/a9model.py SYNC_JOB_CYCLES).
 *
 * C99, stdint, no globals; the worker's memory must stay valid until tph_worker_stop.
 */
#ifndef TPHWORK_H
#define TPHWORK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* half 0 runs on the caller's thread, half 1 on the worker (or after half 0, serially) */
typedef void (*tph_half_fn)(void *arg, uint32_t half);

/* bytes of a worker's memory (64-byte aligned by the caller: tph_worker_start checks) */
uint32_t tph_worker_bytes(void);
/* lay out a worker in mem and start its thread when threads >= 2 (spinning at most spin_us
 * microseconds for a job before it sleeps); returns the threads that now run the halves: 2,
 * or 1 (the serial fallback: threads 1, no pthreads, or the thread not created); 0 when mem
 * is not 64-byte aligned */
uint32_t tph_worker_start(void *mem, uint32_t threads, uint32_t spin_us);
/* the threads running the halves (1 or 2) */
uint32_t tph_worker_threads(const void *w);
/* join the worker's thread (the serial fallback after it); idempotent. In a child of fork()
 * (another process id than the start's) the thread is not there: only the state is reset */
void tph_worker_stop(void *w);
/* a job follows soon: a sleeping worker wakes and spins (nothing in the serial fallback) */
void tph_worker_wake(void *w);
/* fn(arg, 1) on the worker and fn(arg, 0) here; returns when both are done. last != 0: the
 * worker sleeps after this job instead of spinning for the next */
void tph_worker_run(void *w, tph_half_fn fn, void *arg, uint32_t last);

/* argmax over the worker: each half's first maximum (tph_argmax on [0, h) and [h, n), h =
 * (n / 2) rounded down to a multiple of 8) on its own core, then the first maximum of the two
 * (tph_argmax of the pair: the first NaN, else the larger, the first half's on a tie), so
 * numpy.argmax's index exactly; with one thread (or n < 16) tph_argmax itself (each half's
 * own search for its first maximum is work one thread need not do); -1 if n == 0. last: as
 * tph_worker_run */
int32_t tph_argmax_halves(void *w, const float *x, uint32_t n, uint32_t last);

#ifdef __cplusplus
}
#endif
#endif /* TPHWORK_H */
