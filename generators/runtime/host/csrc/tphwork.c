/* tphwork: the second core's share of the step (tphwork.h; docs/runtime.md section 9).
 *
 * The fast path is three words in two cache lines: seq (the caller's: jobs posted) and done
 * (the worker's: jobs finished), each on its own 64-byte line so that the two cores do not
 * pass one line back and forth while both work. The ordering: the caller writes the job (fn,
 * arg, last), then seq; the worker reads seq, then the job; the worker writes done after its
 * half; the caller reads done, then the half's results. Where a side may sleep, the store that
 * the other side waits for and the load of the other side's "sleeping" word are sequentially
 * consistent on both sides (Dekker's pattern), so either the sleeper sees the store before it
 * sleeps or the storer sees the sleeper and signals under the mutex.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200112L   /* pthreads, clock_gettime, pthread_sigmask */
#endif

#include "tphwork.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tphost.h"

#if !defined(TPH_NO_THREADS) && defined(_POSIX_THREADS) && _POSIX_THREADS > 0
#define TPH_THREADS 1
#include <pthread.h>
#include <signal.h>
#else
#define TPH_THREADS 0
#endif

#define LINE 64
#define SEQ __ATOMIC_SEQ_CST
#define ACQ __ATOMIC_ACQUIRE
#define REL __ATOMIC_RELEASE
#define RLX __ATOMIC_RELAXED

#if defined(__arm__) || defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#elif defined(__i386__) || defined(__x86_64__)
#define CPU_RELAX() __asm__ __volatile__("pause" ::: "memory")
#else
#define CPU_RELAX() __asm__ __volatile__("" ::: "memory")
#endif

typedef struct worker {
    /* the caller's line */
    uint32_t seq, last, alert, quit;
    tph_half_fn fn;
    void *arg;
    /* the worker's line */
    uint32_t done __attribute__((aligned(LINE)));
    uint32_t sleeping;
    /* neither in the fast path */
    uint32_t waiting __attribute__((aligned(LINE)));   /* the caller sleeps on done */
    uint32_t threads, spin_us;
    int32_t pid;
#if TPH_THREADS
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t job, fin;
#endif
} worker_t;

uint32_t tph_worker_bytes(void) { return (uint32_t)((sizeof(worker_t) + LINE - 1) & ~(LINE - 1)); }

uint32_t tph_worker_threads(const void *w) { return ((const worker_t *)w)->threads; }

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* spin until *word != old (returns the new value) or spin_us have passed (returns old): an
 * acquire load per iteration, the clock every 64 (not inlined: make a9-model leaves its
 * blocks, the waiting, out of the work it counts) */
static __attribute__((noinline)) uint32_t spin_while(const uint32_t *word, uint32_t old, uint32_t spin_us)
{
    uint64_t end = 0;
    uint32_t i, v;
    for (i = 0;; i++) {
        if ((v = __atomic_load_n(word, ACQ)) != old)
            return v;
        if ((i & 63u) == 63u) {
            uint64_t t = now_us();
            if (!end)
                end = t + spin_us;
            else if (t >= end)
                return old;
        }
        CPU_RELAX();
    }
}

#if TPH_THREADS
static void *worker_main(void *p)
{
    worker_t *w = (worker_t *)p;
    uint32_t seen = 0, alerts = 0, s, sleep_now = 0, quit;
    for (;;) {
        s = sleep_now ? seen : spin_while(&w->seq, seen, w->spin_us);
        if (s == seen) {                   /* no job: sleep until one (or an alert) */
            pthread_mutex_lock(&w->mu);
            __atomic_store_n(&w->sleeping, 1u, SEQ);
            while ((s = __atomic_load_n(&w->seq, SEQ)) == seen && !w->quit
                   && __atomic_load_n(&w->alert, SEQ) == alerts)
                pthread_cond_wait(&w->job, &w->mu);
            __atomic_store_n(&w->sleeping, 0u, SEQ);
            alerts = __atomic_load_n(&w->alert, RLX);
            quit = w->quit;
            pthread_mutex_unlock(&w->mu);
            if (quit)
                return NULL;
            sleep_now = 0;
            if (s == seen)                 /* woken by tph_worker_wake: spin for the job */
                continue;
        }
        w->fn(w->arg, 1u);
        sleep_now = w->last;
        seen = s;
        __atomic_store_n(&w->done, s, SEQ);
        if (__atomic_load_n(&w->waiting, SEQ)) {
            pthread_mutex_lock(&w->mu);
            pthread_cond_signal(&w->fin);
            pthread_mutex_unlock(&w->mu);
        }
    }
}

/* the caller, its half done: wait for the worker's (spin, then sleep) */
static void wait_done(worker_t *w, uint32_t s)
{
    if (spin_while(&w->done, s - 1u, w->spin_us) == s)
        return;
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->waiting, 1u, SEQ);
    while (__atomic_load_n(&w->done, SEQ) != s)
        pthread_cond_wait(&w->fin, &w->mu);
    __atomic_store_n(&w->waiting, 0u, SEQ);
    pthread_mutex_unlock(&w->mu);
}

static void signal_job(worker_t *w)
{
    if (__atomic_load_n(&w->sleeping, SEQ)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->job);
        pthread_mutex_unlock(&w->mu);
    }
}
#endif

uint32_t tph_worker_start(void *mem, uint32_t threads, uint32_t spin_us)
{
    worker_t *w = (worker_t *)mem;
    if (!mem || ((uintptr_t)mem & (LINE - 1)))
        return 0;
    memset(w, 0, sizeof *w);
    w->threads = 1;
    w->spin_us = spin_us;
#if TPH_THREADS
    if (threads >= 2u) {
        pthread_attr_t at;
        sigset_t all, old;
        int rc;
        if (pthread_mutex_init(&w->mu, NULL))
            return 1;
        if (pthread_cond_init(&w->job, NULL)) {
            pthread_mutex_destroy(&w->mu);
            return 1;
        }
        if (pthread_cond_init(&w->fin, NULL)) {
            pthread_cond_destroy(&w->job);
            pthread_mutex_destroy(&w->mu);
            return 1;
        }
        /* the worker takes no signal (the caller's thread, Python's, handles them) and a
         * small stack (the kernels keep their vectors in the caller's memory) */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        rc = pthread_attr_init(&at);
        if (!rc) {
            pthread_attr_setstacksize(&at, 256u * 1024u);
            rc = pthread_create(&w->thread, &at, worker_main, w);
            pthread_attr_destroy(&at);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc) {
            pthread_cond_destroy(&w->fin);
            pthread_cond_destroy(&w->job);
            pthread_mutex_destroy(&w->mu);
            return 1;
        }
        w->pid = (int32_t)getpid();
        w->threads = 2;
    }
#else
    (void)threads;
#endif
    return w->threads;
}

void tph_worker_stop(void *p)
{
    worker_t *w = (worker_t *)p;
    if (!w || w->threads < 2u)
        return;
#if TPH_THREADS
    if ((int32_t)getpid() == w->pid) {    /* a fork's child has no worker to join */
        pthread_mutex_lock(&w->mu);
        w->quit = 1;
        pthread_cond_signal(&w->job);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->fin);
        pthread_cond_destroy(&w->job);
        pthread_mutex_destroy(&w->mu);
    }
#endif
    w->threads = 1;
}

void tph_worker_wake(void *p)
{
    worker_t *w = (worker_t *)p;
    if (w->threads < 2u)
        return;
#if TPH_THREADS
    __atomic_add_fetch(&w->alert, 1u, SEQ);
    signal_job(w);
#endif
}

void tph_worker_run(void *p, tph_half_fn fn, void *arg, uint32_t last)
{
    worker_t *w = (worker_t *)p;
    if (w->threads < 2u) {                 /* the serial fallback */
        fn(arg, 0u);
        fn(arg, 1u);
        /* no tail call: each half returns here (make a9-model's profile_halves ends a half
         * at the next block of this function) */
        __asm__ __volatile__("" ::: "memory");
        return;
    }
#if TPH_THREADS
    {
        const uint32_t s = w->seq + 1u;
        w->fn = fn;
        w->arg = arg;
        w->last = last;
        __atomic_store_n(&w->seq, s, SEQ);
        signal_job(w);
        fn(arg, 0u);
        wait_done(w, s);
    }
#else
    (void)last;
#endif
}

/* ------------------------------------------------------------------ argmax by halves */

typedef struct {
    const float *x;
    uint32_t h, n;
    int32_t idx[2];
} argmax_job;

static void argmax_half(void *p, uint32_t half)
{
    argmax_job *j = (argmax_job *)p;
    const uint32_t a = half ? j->h : 0u, b = half ? j->n : j->h;
    const int32_t i = tph_argmax(j->x + a, b - a);
    j->idx[half] = (int32_t)a + i;
}

int32_t tph_argmax_halves(void *w, const float *x, uint32_t n, uint32_t last)
{
    argmax_job j;
    float pair[2];
    int32_t second;
    j.x = x;
    j.n = n;
    j.h = (n / 2u) & ~7u;
    if (j.h == 0u || ((worker_t *)w)->threads < 2u)   /* fewer than 16, or one thread */
        return tph_argmax(x, n);
    tph_worker_run(w, argmax_half, &j, last);
    /* the first maximum of the two halves' maxima, by the kernel's own rule: the first NaN,
     * else the larger, the first on a tie (-0 and +0 tie) */
    pair[0] = x[j.idx[0]];
    pair[1] = x[j.idx[1]];
    second = tph_argmax(pair, 2u) == 1;
#ifdef TPH_WORK_MUTANT_TIE               /* a wrong combination, for the tests: the second
                                            half's maximum on a tie */
    second |= pair[0] == pair[1];
#endif
    return j.idx[second ? 1 : 0];
}
