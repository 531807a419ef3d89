/* bignum: arbitrary precision in base 10^9 -- N! (default 100), 2^1000, Fibonacci(1000)
 * and a multiply cross-check. Usage: bignum [N]. Exit code 0 when every self-check passes. */
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

#define BASE 1000000000u

/* Little-endian limbs in base 10^9. */
typedef struct {
    uint32_t *d;
    size_t n, cap;
} big;

static void big_init(big *b, uint32_t v) {
    b->cap = 16;
    b->d = malloc(b->cap * sizeof *b->d);
    b->d[0] = v;
    b->n = 1;
}

static void big_reserve(big *b, size_t n) {
    if (n > b->cap) {
        while (b->cap < n)
            b->cap *= 2;
        b->d = realloc(b->d, b->cap * sizeof *b->d);
    }
}

static void big_mul_small(big *b, uint32_t m) {
    uint64_t carry = 0;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t t = (uint64_t)b->d[i] * m + carry;
        b->d[i] = (uint32_t)(t % BASE);
        carry = t / BASE;
    }
    while (carry) {
        big_reserve(b, b->n + 1);
        b->d[b->n++] = (uint32_t)(carry % BASE);
        carry /= BASE;
    }
}

/* r = a + b (r may alias a). */
static void big_add(big *r, const big *a, const big *b) {
    size_t n = a->n > b->n ? a->n : b->n;
    big_reserve(r, n + 1);
    uint32_t carry = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = carry + (i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0);
        carry = s >= BASE;
        r->d[i] = carry ? s - BASE : s;
    }
    r->n = n;
    if (carry)
        r->d[r->n++] = carry;
}

/* Schoolbook product r = a * b (r distinct from a and b). */
static void big_mul(big *r, const big *a, const big *b) {
    size_t n = a->n + b->n;
    uint64_t *acc = calloc(n + 1, sizeof *acc);
    for (size_t i = 0; i < a->n; i++) {
        uint64_t carry = 0;
        for (size_t j = 0; j < b->n; j++) {
            uint64_t t = acc[i + j] + (uint64_t)a->d[i] * b->d[j] + carry;
            acc[i + j] = t % BASE;
            carry = t / BASE;
        }
        for (size_t k = i + b->n; carry; k++) {
            uint64_t t = acc[k] + carry;
            acc[k] = t % BASE;
            carry = t / BASE;
        }
    }
    big_reserve(r, n);
    for (size_t i = 0; i < n; i++)
        r->d[i] = (uint32_t)acc[i];
    r->n = n;
    while (r->n > 1 && r->d[r->n - 1] == 0)
        r->n--;
    free(acc);
}

static int big_eq(const big *a, const big *b) {
    return a->n == b->n && memcmp(a->d, b->d, a->n * sizeof *a->d) == 0;
}

/* Decimal string (caller frees). */
static char *big_str(const big *b) {
    char *s = malloc(b->n * 9 + 1);
    int len = sprintf(s, "%" PRIu32, b->d[b->n - 1]);
    for (size_t i = b->n - 1; i-- > 0;)
        len += sprintf(s + len, "%09" PRIu32, b->d[i]);
    return s;
}

static unsigned digit_sum(const char *s) {
    unsigned sum = 0;
    for (; *s; s++)
        sum += (unsigned)(*s - '0');
    return sum;
}

static void print_big(const char *what, const big *b, int full) {
    char *s = big_str(b);
    size_t len = strlen(s);
    if (full || len <= 60)
        printf("%s = %s\n", what, s);
    else
        printf("%s = %.25s...%s\n", what, s, s + len - 25);
    printf("%s: digits=%zu digit_sum=%u\n", what, len, digit_sum(s));
    free(s);
}

int main(int argc, char **argv) {
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 100;
    big f;
    big_init(&f, 1);
    for (uint32_t i = 2; i <= n; i++)
        big_mul_small(&f, i);
    char label[32];
    snprintf(label, sizeof label, "%u!", n);
    print_big(label, &f, n <= 100);
    if (n == 100) {
        char *s = big_str(&f);
        CHECK(strlen(s) == 158 && digit_sum(s) == 648);
        free(s);
    }

    big p;
    big_init(&p, 1);
    for (int i = 0; i < 1000; i++)
        big_mul_small(&p, 2);
    print_big("2^1000", &p, 0);
    char *ps = big_str(&p);
    CHECK(digit_sum(ps) == 1366 && strlen(ps) == 302);
    free(ps);

    big a, b;
    big_init(&a, 0);
    big_init(&b, 1);
    for (int i = 1; i < 1000; i++) { /* (a, b) = (b, a + b) */
        big_add(&a, &a, &b);
        big t = a;
        a = b;
        b = t;
    }
    print_big("fib(1000)", &b, 0);
    char *fs = big_str(&b);
    CHECK(strlen(fs) == 209 && strncmp(fs, "43466557686937456435688527675040625802564660517371780402481729089536555417949051890403879840079255169295922593080322634775209689623239873322471161642996440906533187938298969649928516003704476137795166849228875", 209) == 0);
    free(fs);

    /* 3^300 two ways: repeated small multiplication vs squaring with big_mul. */
    big x, y, sq, tmp;
    big_init(&x, 1);
    for (int i = 0; i < 300; i++)
        big_mul_small(&x, 3);
    big_init(&y, 1);
    big_init(&sq, 3);
    big_init(&tmp, 0);
    for (unsigned e = 300; e; e >>= 1) {
        if (e & 1) {
            big_mul(&tmp, &y, &sq);
            big t = y;
            y = tmp;
            tmp = t;
        }
        big_mul(&tmp, &sq, &sq);
        big t = sq;
        sq = tmp;
        tmp = t;
    }
    CHECK(big_eq(&x, &y));
    print_big("3^300", &y, 0);

    free(f.d);
    free(p.d);
    free(a.d);
    free(b.d);
    free(x.d);
    free(y.d);
    free(sq.d);
    free(tmp.d);
    printf("bignum %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
