/* recursion: Ackermann, naive Fibonacci, Towers of Hanoi, permutations, N-queens, mutual
 * recursion and a deep non-tail recursion. Usage: recursion [FIB_N]. Exit code:
 * ackermann(3, 3) = 61 when every self-check passes, 1 otherwise. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: %s\n", __LINE__, #cond);                                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static uint64_t calls;

static uint64_t ackermann(uint64_t m, uint64_t n) {
    calls++;
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ackermann(m - 1, 1);
    return ackermann(m - 1, ackermann(m, n - 1));
}

static uint64_t fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static uint64_t hanoi_moves;
static uint64_t hanoi_hash;
static void hanoi(int n, int from, int to, int via) {
    if (n == 0)
        return;
    hanoi(n - 1, from, via, to);
    hanoi_moves++;
    hanoi_hash = hanoi_hash * 31 + (uint64_t)(from * 3 + to);
    hanoi(n - 1, via, to, from);
}

static uint64_t perm_count, perm_hash;
static void permute(int *a, int k, int n) {
    if (k == n) {
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
            v = v * 10 + (uint64_t)a[i];
        perm_count++;
        perm_hash ^= v * 0x9e3779b97f4a7c15ULL;
        return;
    }
    for (int i = k; i < n; i++) {
        int t = a[k];
        a[k] = a[i];
        a[i] = t;
        permute(a, k + 1, n);
        a[i] = a[k];
        a[k] = t;
    }
}

static int queens(int n, int row, unsigned cols, unsigned d1, unsigned d2) {
    if (row == n)
        return 1;
    int count = 0;
    for (int c = 0; c < n; c++) {
        unsigned cb = 1u << c, b1 = 1u << (row + c), b2 = 1u << (row - c + n - 1);
        if ((cols & cb) || (d1 & b1) || (d2 & b2))
            continue;
        count += queens(n, row + 1, cols | cb, d1 | b1, d2 | b2);
    }
    return count;
}

static int is_odd(unsigned n);
static int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
static int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

/* Not a tail call: the addition happens after the recursive call returns. */
static uint64_t deep_sum(volatile uint64_t n) { return n == 0 ? 0 : n + deep_sum(n - 1) * 1; }

int main(int argc, char **argv) {
    unsigned fn = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 20;
    uint64_t a23 = ackermann(2, 3);
    uint64_t c23 = calls;
    calls = 0;
    uint64_t a33 = ackermann(3, 3);
    uint64_t c33 = calls;
    calls = 0;
    uint64_t a35 = ackermann(3, 5);
    printf("ackermann(2,3)=%" PRIu64 " calls=%" PRIu64 "\n", a23, c23);
    printf("ackermann(3,3)=%" PRIu64 " calls=%" PRIu64 "\n", a33, c33);
    printf("ackermann(3,5)=%" PRIu64 " calls=%" PRIu64 "\n", a35, calls);
    CHECK(a23 == 9 && a33 == 61 && a35 == 253 && calls == 42438);

    uint64_t f = fib(fn);
    printf("fib(%u)=%" PRIu64 "\n", fn, f);
    if (fn == 20)
        CHECK(f == 6765);

    hanoi(12, 0, 2, 1);
    printf("hanoi(12) moves=%" PRIu64 " hash=%016" PRIx64 "\n", hanoi_moves, hanoi_hash);
    CHECK(hanoi_moves == 4095);

    int a[7] = {1, 2, 3, 4, 5, 6, 7};
    permute(a, 0, 7);
    printf("permutations(7)=%" PRIu64 " hash=%016" PRIx64 "\n", perm_count, perm_hash);
    CHECK(perm_count == 5040);

    int q8 = queens(8, 0, 0, 0, 0), q6 = queens(6, 0, 0, 0, 0);
    printf("queens(6)=%d queens(8)=%d\n", q6, q8);
    CHECK(q6 == 4 && q8 == 92);

    CHECK(is_even(1000) && is_odd(777) && !is_even(999));
    uint64_t s = deep_sum(10000);
    printf("deep_sum(10000)=%" PRIu64 "\n", s);
    CHECK(s == 50005000);
    printf("recursion %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : (int)a33;
}
