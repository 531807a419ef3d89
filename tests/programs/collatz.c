/* collatz: longest Collatz chain below LIMIT, with a small memo table -- a tight integer
 * loop for benchmarking. Usage: collatz [LIMIT]. Leaves through fflush + _exit(7) (the raw
 * exit_group path, no atexit handlers) when the self-checks pass, _exit(1) otherwise. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: %s\n", __LINE__, #cond);                                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { MEMO = 1 << 16 };
static uint16_t memo[MEMO];

static uint32_t chain_length(uint64_t n, uint64_t *peak) {
    uint32_t steps = 0;
    while (n != 1) {
        if (n < MEMO && memo[n])
            return steps + memo[n];
        n = (n & 1) ? 3 * n + 1 : n >> 1;
        if (n > *peak)
            *peak = n;
        steps++;
    }
    return steps;
}

/* Without the memo table: the full trajectory. */
static uint32_t plain_chain(uint64_t n, uint64_t *peak) {
    uint32_t steps = 0;
    for (*peak = n; n != 1; steps++) {
        n = (n & 1) ? 3 * n + 1 : n >> 1;
        if (n > *peak)
            *peak = n;
    }
    return steps;
}

int main(int argc, char **argv) {
    uint64_t limit = argc > 1 ? strtoull(argv[1], NULL, 0) : 30000;
    uint64_t best = 1, peak = 0, total = 0;
    uint32_t best_len = 0;
    for (uint64_t n = 1; n < limit; n++) {
        uint32_t len = chain_length(n, &peak);
        if (n < MEMO)
            memo[n] = (uint16_t)len;
        total += len;
        if (len > best_len) {
            best_len = len;
            best = n;
        }
    }
    printf("limit=%" PRIu64 " longest chain starts at %" PRIu64 " with %u steps\n", limit, best,
           best_len);
    printf("total steps=%" PRIu64 " peak seen=%" PRIu64 "\n", total, peak);
    /* Known values: 27 takes 111 steps (peak 9232); below 10^6 the winner is 837799 (524). */
    uint64_t p27 = 0;
    CHECK(plain_chain(27, &p27) == 111 && p27 == 9232);
    if (limit == 1000000)
        CHECK(best == 837799 && best_len == 524);
    printf("collatz %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    fflush(stdout);
    _exit(failures ? 1 : 7);
}
