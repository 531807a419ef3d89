/* primes: sieve of Eratosthenes, prime counts at powers of ten checked against pi(10^k),
 * twin primes, and a trial-division cross-check. Usage: primes [LIMIT]. Exit code 0 when
 * every self-check passes, 1 otherwise. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: %s\n", __LINE__, #cond);                                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static int trial_division(uint32_t n) {
    if (n < 2)
        return 0;
    for (uint32_t d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    static const uint32_t pi_pow10[] = {0, 4, 25, 168, 1229, 9592, 78498, 664579, 5761455,
                                        50847534};
    uint32_t limit = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 100000;
    if (limit < 2)
        limit = 2;
    unsigned char *composite = calloc(limit + 1, 1);
    if (!composite) {
        printf("out of memory\n");
        return 2;
    }
    composite[0] = composite[1] = 1;
    for (uint64_t i = 2; i * i <= limit; i++)
        if (!composite[i])
            for (uint64_t j = i * i; j <= limit; j += i)
                composite[j] = 1;

    uint32_t count = 0, twins = 0, last = 0, gap = 0, gap_at = 0;
    uint64_t sum = 0, next_pow = 10;
    int k = 1;
    for (uint32_t n = 2; n <= limit; n++) {
        if (!composite[n]) {
            count++;
            sum += n;
            if (last && n - last == 2)
                twins++;
            if (last && n - last > gap) {
                gap = n - last;
                gap_at = last;
            }
            last = n;
        }
        if (n == next_pow) {
            printf("pi(%" PRIu64 ")=%u\n", next_pow, count);
            if (k < (int)(sizeof pi_pow10 / sizeof pi_pow10[0]))
                CHECK(count == pi_pow10[k]);
            next_pow *= 10;
            k++;
        }
    }
    printf("limit=%u count=%u sum=%" PRIu64 " largest=%u twins=%u\n", limit, count, sum, last,
           twins);
    printf("largest gap=%u after %u\n", gap, gap_at);

    /* Cross-check the sieve against trial division on a stride of numbers. */
    uint32_t checked = 0, bad = 0;
    for (uint32_t n = 0; n <= limit && checked < 2000; n += 1 + limit / 2000, checked++)
        bad += (trial_division(n) != !composite[n]);
    CHECK(bad == 0);
    printf("cross-checked %u numbers\n", checked);
    free(composite);
    printf("primes %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
