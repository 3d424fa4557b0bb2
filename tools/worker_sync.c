/* worker_sync: the cost of one tph_worker_run handshake (generators/runtime/host/csrc/tphwork.c)
 * on the machine that runs it, for docs/runtime.md section 9 ("Both cores"):
 *
 *     gcc -std=c99 -O2 -Igenerators/runtime/host/csrc tools/worker_sync.c \
 *         generators/runtime/host/csrc/tphwork.c generators/runtime/host/csrc/tphost.c \
 *         -lm -pthread -o build/worker_sync && build/worker_sync
 *     (ARMv7: arm-linux-gnueabihf-gcc ... -static -mcpu=cortex-a9 -mfpu=neon, then
 *      qemu-arm -cpu cortex-a9 build/worker_sync_arm)
 *
 * Three figures, each the mean over JOBS jobs whose halves do nothing: "serial" (threads 1:
 * two calls), "spinning" (threads 2, the worker spinning for its next job: the cache lines of
 * the job and of its completion between the cores) and "sleeping" (threads 2, last = 1: the
 * worker sleeps after each job, so every job wakes it through the condition variable: a
 * futex wake and the scheduler's wake-up of a thread on the other core).
 */
#define _POSIX_C_SOURCE 200112L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tphwork.h"

#define JOBS 20000u

static void nothing(void *arg, uint32_t half)
{
    ((volatile uint32_t *)arg)[half]++;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double per_job(void *w, uint32_t last, uint32_t jobs)
{
    volatile uint32_t count[2] = {0, 0};
    uint32_t i;
    double t0 = now_ns();
    for (i = 0; i < jobs; i++)
        tph_worker_run(w, nothing, (void *)count, last);
    if (count[0] != jobs || count[1] != jobs) {
        fprintf(stderr, "worker_sync: lost a half\n");
        exit(1);
    }
    return (now_ns() - t0) / jobs;
}

int main(void)
{
    uint8_t *mem = malloc(tph_worker_bytes() + 64u);
    void *w;
    uint32_t threads;
    double serial, spin, sleep;
    if (!mem)
        return 2;
    w = mem + (64u - (uint32_t)((uintptr_t)mem & 63u)) % 64u;
    tph_worker_start(w, 1u, 0u);
    serial = per_job(w, 0u, JOBS);
    threads = tph_worker_start(w, 2u, 20000u);
    per_job(w, 0u, 100u);                 /* the worker awake */
    spin = per_job(w, 0u, JOBS);
    sleep = per_job(w, 1u, JOBS / 10u);
    tph_worker_stop(w);
    free(mem);
    printf("threads %u serial %.0f ns spinning %.0f ns sleeping %.0f ns per job\n",
           (unsigned)threads, serial, spin, sleep);
    return threads == 2u ? 0 : 1;
}
