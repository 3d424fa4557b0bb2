/* Loops whose cycles on a real Cortex-A9 are published, for make a9-core-check
 * (tools/a9_core_check.py): each is run under qemu-arm and priced by the Cortex-A9 model's own
 * core term (generators/runtime/bench/a9model.py: llvm-mca per translation block x its
 * executions), against the published measurement.
 *
 * Each loop is written here in ARM-mode assembly, instruction for instruction the loop the
 * source describes (its instructions and their register dependences; the sources and their
 * figures are in tools/a9_core_check.py REFERENCES), so that no compiler stands between the
 * measurement and the model: the compiler's choices, the unknown of the write-up's kernels
 * (make a9-model ARGS=--build-grid), are out of this check.
 *
 *   vmla_q      five independent NEON multiply-accumulates on quadwords (each register its own
 *               accumulator and operands), a count down and a branch
 *   vmla_d      the same with ten on doublewords
 *   vmla_chain  five NEON multiply-accumulates on quadwords, each one's operands the result of
 *               another (q0 += q1*q1, q1 += q2*q2, q2 += q3*q3, q3 += q4*q4, q4 += q2*q2;
 *               the measured loop ends in BGE, this one in BNE: one predicted branch either way)
 *   chase       a pointer chase in L1: each load's address the last load's result
 *   loads       eight independent loads from one L1 line (a count down and a branch beside)
 *   fmacd       the inner loop of a double-precision VFP matrix multiply as gcc built it
 *               (RgbenchMM's, listed by its author): six VLDR (FLDD), eight VMLA.F64 (FMACD)
 *               on independent accumulators, five integer adds and compares, a branch; here
 *               the column stride is 0 and the rows are 10 KiB each, so every load hits L1
 *
 * usage: corecheck KERNEL ITERATIONS   (prints a value that depends on the loop's work)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__arm__) || defined(__thumb__)
#error "corecheck.c: ARM mode (-marm) ARMv7 with NEON only (the loops are ARM-mode assembly)"
#endif

__attribute__((noinline)) void cc_vmla_q(uint32_t n)
{
    __asm__ volatile(
        "vmov.i32 q0, #0\n\tvmov.i32 q1, #0\n\tvmov.i32 q2, #0\n\tvmov.i32 q3, #0\n\t"
        "vmov.i32 q4, #0\n"
        "1:\n\t"
        "vmla.f32 q0, q0, q0\n\t"
        "vmla.f32 q1, q1, q1\n\t"
        "vmla.f32 q2, q2, q2\n\t"
        "vmla.f32 q3, q3, q3\n\t"
        "vmla.f32 q4, q4, q4\n\t"
        "subs %0, %0, #1\n\t"
        "bne 1b\n"
        : "+r"(n) : : "q0", "q1", "q2", "q3", "q4", "cc");
}

__attribute__((noinline)) void cc_vmla_d(uint32_t n)
{
    __asm__ volatile(
        "vmov.i32 q0, #0\n\tvmov.i32 q1, #0\n\tvmov.i32 q2, #0\n\tvmov.i32 q3, #0\n\t"
        "vmov.i32 q4, #0\n"
        "1:\n\t"
        "vmla.f32 d0, d0, d0\n\t"
        "vmla.f32 d1, d1, d1\n\t"
        "vmla.f32 d2, d2, d2\n\t"
        "vmla.f32 d3, d3, d3\n\t"
        "vmla.f32 d4, d4, d4\n\t"
        "vmla.f32 d5, d5, d5\n\t"
        "vmla.f32 d6, d6, d6\n\t"
        "vmla.f32 d7, d7, d7\n\t"
        "vmla.f32 d8, d8, d8\n\t"
        "vmla.f32 d9, d9, d9\n\t"
        "subs %0, %0, #1\n\t"
        "bne 1b\n"
        : "+r"(n) : : "q0", "q1", "q2", "q3", "q4", "cc");
}

__attribute__((noinline)) void cc_vmla_chain(uint32_t n)
{
    __asm__ volatile(
        "vmov.i32 q0, #0\n\tvmov.i32 q1, #0\n\tvmov.i32 q2, #0\n\tvmov.i32 q3, #0\n\t"
        "vmov.i32 q4, #0\n"
        "1:\n\t"
        "vmla.f32 q0, q1, q1\n\t"
        "vmla.f32 q1, q2, q2\n\t"
        "vmla.f32 q2, q3, q3\n\t"
        "vmla.f32 q3, q4, q4\n\t"
        "vmla.f32 q4, q2, q2\n\t"
        "subs %0, %0, #1\n\t"
        "bne 1b\n"
        : "+r"(n) : : "q0", "q1", "q2", "q3", "q4", "cc");
}

static void *ring[8] __attribute__((aligned(32)));

__attribute__((noinline)) uintptr_t cc_chase(uint32_t n)
{
    void *p = ring[0];
    __asm__ volatile(
        "1:\n\t"
        "ldr %1, [%1]\n\t"
        "subs %0, %0, #1\n\t"
        "bne 1b\n"
        : "+r"(n), "+r"(p) : : "memory", "cc");
    return (uintptr_t)p;
}

static uint32_t line[8] __attribute__((aligned(32))) = {1, 2, 3, 4, 5, 6, 7, 8};

__attribute__((noinline)) uint32_t cc_loads(uint32_t n)
{
    uint32_t s;
    __asm__ volatile(
        "1:\n\t"
        "ldr r2, [%1]\n\t"
        "ldr r3, [%1, #4]\n\t"
        "ldr r4, [%1, #8]\n\t"
        "ldr r5, [%1, #12]\n\t"
        "ldr r6, [%1, #16]\n\t"
        "ldr r7, [%1, #20]\n\t"
        "ldr r8, [%1, #24]\n\t"
        "ldr r9, [%1, #28]\n\t"
        "subs %0, %0, #1\n\t"
        "bne 1b\n\t"
        "add %0, r2, r9\n"
        : "+r"(n) : "r"(line) : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "memory",
          "cc");
    s = n;
    return s;
}

/* the two rows the loop walks (8 bytes a trip each) and the column it reads (stride 0): at most
 * FMACD_TRIPS trips, 20 KiB with the column, in L1 (32 KiB) */
#define FMACD_TRIPS 1280
#define STR(x) #x
#define XSTR(x) STR(x)
static double mat[2 * FMACD_TRIPS + 4] __attribute__((aligned(32)));

__attribute__((noinline)) void cc_fmacd(uint32_t n)
{
    __asm__ volatile(
        "add r0, %1, #32\n\tadd r1, r0, #(8 * " XSTR(FMACD_TRIPS) ")\n\t"
        "add r3, %1, #24\n\tmov r2, #0\n\tmov r5, #0\n\t"
        "vmov.i32 q0, #0\n\tvmov.i32 q4, #0\n\tvmov.i32 q5, #0\n\tvmov.i32 q6, #0\n"
        "1:\n\t"
        "adds r2, r2, #1\n\t"
        "adds r1, r1, #8\n\t"
        "adds r0, r0, #8\n\t"
        "cmp r2, %0\n\t"
        "vldr d7, [r1]\n\t"
        "vldr d6, [r0]\n\t"
        "vldr d5, [r3, #-24]\n\t"
        "vldr d4, [r3, #-16]\n\t"
        "vldr d3, [r3, #-8]\n\t"
        "vldr d2, [r3]\n\t"
        "vmla.f64 d1, d7, d5\n\t"
        "add r3, r3, r5\n\t"
        "vmla.f64 d0, d7, d4\n\t"
        "vmla.f64 d8, d7, d3\n\t"
        "vmla.f64 d9, d7, d2\n\t"
        "vmla.f64 d11, d5, d6\n\t"
        "vmla.f64 d12, d4, d6\n\t"
        "vmla.f64 d13, d3, d6\n\t"
        "vmla.f64 d10, d2, d6\n\t"
        "bne 1b\n"
        : : "r"(n), "r"(mat) : "r0", "r1", "r2", "r3", "r5", "q0", "q1", "q2", "q3", "q4", "q5",
          "q6", "memory", "cc");
}

int main(int argc, char **argv)
{
    uint32_t n;
    const char *k;
    if (argc != 3 || (n = (uint32_t)strtoul(argv[2], NULL, 10)) == 0u) {
        fprintf(stderr, "usage: corecheck vmla_q|vmla_d|vmla_chain|chase|loads|fmacd ITERATIONS\n");
        return 2;
    }
    k = argv[1];
    ring[0] = (void *)&ring[0];                 /* the chase: each load returns its address */
    if (!strcmp(k, "vmla_q"))
        cc_vmla_q(n);
    else if (!strcmp(k, "vmla_d"))
        cc_vmla_d(n);
    else if (!strcmp(k, "vmla_chain"))
        cc_vmla_chain(n);
    else if (!strcmp(k, "chase"))
        printf("%u\n", (unsigned)(cc_chase(n) != 0));
    else if (!strcmp(k, "fmacd") && n <= FMACD_TRIPS)
        cc_fmacd(n);
    else if (!strcmp(k, "loads"))
        printf("%u\n", (unsigned)cc_loads(n));
    else {
        fprintf(stderr, "corecheck: no kernel %s\n", k);
        return 2;
    }
    return 0;
}
