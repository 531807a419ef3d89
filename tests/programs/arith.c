/* arith: 64-bit multiply/divide/modulo (signed and unsigned), overflow builtins, 128-bit
 * integers, shifts, gcd and a deterministic 64-bit Miller-Rabin built on 128-bit mulmod.
 * Usage: arith [ITERATIONS]. Exit code 0 when every self-check passes, 1 otherwise. */
#include <inttypes.h>
#include <limits.h>
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

static uint64_t rng_state = 0x0123456789abcdefULL;
static uint64_t next_u64(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng_state ^ (rng_state >> 29);
}

/* Decimal text of an unsigned 128-bit value (uses 128-bit division by 10^19). */
static const char *u128_str(unsigned __int128 v, char *buf) {
    char tmp[48];
    int n = 0;
    const uint64_t chunk = 10000000000000000000ULL;
    do {
        uint64_t part = (uint64_t)(v % chunk);
        v /= chunk;
        for (int i = 0; i < 19; i++) {
            tmp[n++] = (char)('0' + part % 10);
            part /= 10;
            if (v == 0 && part == 0)
                break;
        }
    } while (v != 0);
    for (int i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = 0;
    return buf;
}

static const char *i128_str(__int128 v, char *buf) {
    if (v < 0) {
        buf[0] = '-';
        u128_str(-(unsigned __int128)v, buf + 1);
        return buf;
    }
    return u128_str((unsigned __int128)v, buf);
}

/* Values kept in volatile storage so that -O2 cannot fold the arithmetic away. */
static volatile int64_t svals[] = {
    0, 1, -1, 2, -2, 3, 7, -7, 10, 1000000007, -1000000007, 123456789012345LL,
    -123456789012345LL, INT64_MAX, INT64_MIN + 1, INT64_MIN, 0x7fffffffLL, -0x80000000LL,
    0x100000000LL, 0xdeadbeefcafeLL,
};
#define NVALS ((int)(sizeof svals / sizeof svals[0]))

static void division_table(void) {
    uint64_t hs = 0, hu = 0, h32 = 0;
    int pairs = 0;
    for (int i = 0; i < NVALS; i++) {
        for (int j = 0; j < NVALS; j++) {
            int64_t a = svals[i], b = svals[j];
            if (b == 0)
                continue;
            pairs++;
            if (!(a == INT64_MIN && b == -1)) {
                int64_t q = a / b, r = a % b;
                CHECK((int64_t)((uint64_t)q * (uint64_t)b + (uint64_t)r) == a);
                CHECK(r == 0 || (r < 0) == (a < 0));
                CHECK(r == 0 || (r < 0 ? -(uint64_t)r : (uint64_t)r) <
                                    (b < 0 ? -(uint64_t)b : (uint64_t)b));
                hs = hs * 31 + ((uint64_t)q ^ ((uint64_t)r << 7));
            }
            uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
            uint64_t uq = ua / ub, ur = ua % ub;
            CHECK(uq * ub + ur == ua && ur < ub);
            hu = hu * 31 + (uq ^ (ur << 7));
            int32_t a32 = (int32_t)a, b32 = (int32_t)b;
            if (b32 != 0 && !(a32 == INT32_MIN && b32 == -1)) {
                int32_t q32 = a32 / b32, r32 = a32 % b32;
                CHECK((int32_t)((uint32_t)q32 * (uint32_t)b32 + (uint32_t)r32) == a32);
                uint32_t uq32 = (uint32_t)a32 / (uint32_t)b32;
                h32 = h32 * 31 + (uint32_t)q32 + ((uint64_t)uq32 << 32);
            }
        }
    }
    printf("div pairs=%d signed=%016" PRIx64 " unsigned=%016" PRIx64 " narrow=%016" PRIx64 "\n",
           pairs, hs, hu, h32);
}

static void overflow_builtins(void) {
    int add = 0, sub = 0, mul = 0, mul32 = 0, umul = 0;
    for (int i = 0; i < NVALS; i++) {
        for (int j = 0; j < NVALS; j++) {
            int64_t a = svals[i], b = svals[j], r;
            int32_t r32;
            uint64_t ur;
            add += __builtin_add_overflow(a, b, &r);
            sub += __builtin_sub_overflow(a, b, &r);
            if (__builtin_mul_overflow(a, b, &r)) {
                mul++;
            } else {
                CHECK(a == 0 || r / a == b);
            }
            mul32 += __builtin_mul_overflow((int32_t)a, (int32_t)b, &r32);
            umul += __builtin_mul_overflow((uint64_t)a, (uint64_t)b, &ur);
        }
    }
    printf("overflows add=%d sub=%d mul=%d mul32=%d umul=%d\n", add, sub, mul, mul32, umul);
}

static void int128(void) {
    char b1[64], b2[64], b3[64];
    unsigned __int128 f = 1;
    int n = 1;
    for (;;) {
        unsigned __int128 nf;
        if (__builtin_mul_overflow(f, (unsigned __int128)(n + 1), &nf))
            break;
        f = nf;
        n++;
    }
    printf("largest factorial in u128: %d! = %s\n", n, u128_str(f, b1));
    CHECK(n == 34);

    __int128 max = (__int128)(((unsigned __int128)1 << 127) - 1);
    __int128 min = -max - 1;
    printf("i128 max=%s min=%s\n", i128_str(max, b1), i128_str(min, b2));

    volatile uint64_t d = 1000000007;
    unsigned __int128 q = (unsigned __int128)max / d, r = (unsigned __int128)max % d;
    CHECK(q * d + r == (unsigned __int128)max);
    __int128 sq = min / (__int128)(int64_t)-d, sr = min % (__int128)(int64_t)-d;
    CHECK(sq * -(__int128)d + sr == min);
    printf("i128 div q=%s r=%s sq=%s\n", u128_str(q, b1), u128_str(r, b2), i128_str(sq, b3));

    /* 64x64->128 multiply cross-checked against schoolbook 32-bit halves. */
    uint64_t hsum = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t a = next_u64(), b = next_u64();
        unsigned __int128 p = (unsigned __int128)a * b;
        uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
        uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
        uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
        uint64_t lo = (mid << 32) | (uint32_t)ll;
        uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
        CHECK((uint64_t)p == lo && (uint64_t)(p >> 64) == hi);
        int64_t sa = (int64_t)a, sb = (int64_t)b;
        __int128 sp = (__int128)sa * sb;
        hsum += (uint64_t)(sp >> 64) ^ hi;
    }
    printf("mul128 checksum=%016" PRIx64 "\n", hsum);
}

static void shifts(void) {
    uint64_t h = 0;
    for (int i = 0; i < NVALS; i++) {
        for (int s = 0; s < 64; s += 3) {
            int64_t a = svals[i];
            h = h * 1099511628211ULL + (uint64_t)(a >> s);
            h = h * 1099511628211ULL + ((uint64_t)a >> s);
            h = h * 1099511628211ULL + ((uint64_t)a << s);
            h = h * 1099511628211ULL + (uint32_t)((int32_t)a >> (s & 31));
        }
    }
    printf("shifts checksum=%016" PRIx64 "\n", h);
}

static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) {
    return (uint64_t)((unsigned __int128)a * b % m);
}

static uint64_t powmod(uint64_t b, uint64_t e, uint64_t m) {
    uint64_t r = 1 % m;
    b %= m;
    while (e) {
        if (e & 1)
            r = mulmod(r, b, m);
        b = mulmod(b, b, m);
        e >>= 1;
    }
    return r;
}

/* Deterministic for all 64-bit n with these twelve bases. */
static int is_prime_u64(uint64_t n) {
    static const uint64_t bases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    if (n < 2)
        return 0;
    for (int i = 0; i < 12; i++) {
        if (n % bases[i] == 0)
            return n == bases[i];
    }
    uint64_t d = n - 1;
    int s = 0;
    while ((d & 1) == 0) {
        d >>= 1;
        s++;
    }
    for (int i = 0; i < 12; i++) {
        uint64_t x = powmod(bases[i], d, n);
        if (x == 1 || x == n - 1)
            continue;
        int composite = 1;
        for (int k = 1; k < s; k++) {
            x = mulmod(x, x, n);
            if (x == n - 1) {
                composite = 0;
                break;
            }
        }
        if (composite)
            return 0;
    }
    return 1;
}

static void number_theory(void) {
    CHECK(gcd(1071, 462) == 21);
    CHECK(gcd(0, 5) == 5);
    CHECK(gcd(12345678901234567890ULL, 9876543210ULL) == 90);
    static const struct {
        uint64_t n;
        int prime;
    } cases[] = {
        {1, 0}, {2, 1}, {561, 0}, {1000000007, 1}, {3215031751ULL, 0},
        {2305843009213693951ULL, 1}, /* 2^61-1 */
        {18446744073709551557ULL, 1}, /* largest 64-bit prime */
        {18446744073709551615ULL, 0}, {4611686014132420609ULL, 0}, /* (2^31-1)^2 */
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int p = is_prime_u64(cases[i].n);
        printf("is_prime(%" PRIu64 ")=%d\n", cases[i].n, p);
        CHECK(p == cases[i].prime);
    }
    uint64_t base = 1000000000000000000ULL;
    int count = 0;
    for (uint64_t n = base; n < base + 200; n++)
        count += is_prime_u64(n);
    printf("primes in [1e18, 1e18+200): %d\n", count);
}

static void mixing_loop(long iters) {
    uint64_t acc = 0;
    int64_t sacc = 0;
    for (long i = 0; i < iters; i++) {
        uint64_t a = next_u64(), b = next_u64(), c = next_u64() >> (i & 31);
        uint64_t x = a * b + c;
        acc += x / (b | 1) + x % (c | 1);
        int64_t sx = (int64_t)x, sb = (int64_t)(b >> 1) | 1;
        sacc ^= sx / sb - sx % (sb >> 7 | 1);
        acc = (acc << 7 | acc >> 57) ^ (uint64_t)sacc;
    }
    printf("mix iters=%ld acc=%016" PRIx64 " sacc=%" PRId64 "\n", iters, acc, sacc);
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 3000;
    division_table();
    overflow_builtins();
    int128();
    shifts();
    number_theory();
    mixing_loop(iters);
    printf("arith %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
