/* bits: popcount/clz/ctz/ffs/parity/bswap builtins against naive loops, rotates, bit
 * reversal, Gray code, power-of-two tricks. Usage: bits [COUNT]. Ends with exit(3) from a
 * helper function (not a return from main) when every self-check passes, exit(1) otherwise. */
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

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t next_u64(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t x = rng_state;
    /* Mix in sparse and dense patterns so edge cases appear. */
    switch ((x >> 60) & 3) {
    case 0: return x >> ((x >> 54) & 63);
    case 1: return x << ((x >> 54) & 63);
    case 2: return x ^ (x >> 17);
    default: return ~(x >> ((x >> 54) & 63));
    }
}

static int naive_popcount(uint64_t x) {
    int n = 0;
    for (int i = 0; i < 64; i++)
        n += (int)((x >> i) & 1);
    return n;
}

static int naive_clz(uint64_t x) {
    int n = 0;
    for (int i = 63; i >= 0 && !((x >> i) & 1); i--)
        n++;
    return n;
}

static int naive_ctz(uint64_t x) {
    int n = 0;
    for (int i = 0; i < 64 && !((x >> i) & 1); i++)
        n++;
    return n;
}

static uint64_t rotl64(uint64_t x, unsigned r) { return (x << (r & 63)) | (x >> (-r & 63)); }
static uint64_t rotr64(uint64_t x, unsigned r) { return (x >> (r & 63)) | (x << (-r & 63)); }
static uint32_t rotl32(uint32_t x, unsigned r) { return (x << (r & 31)) | (x >> (-r & 31)); }
static uint16_t rotl16(uint16_t x, unsigned r) {
    return (uint16_t)((x << (r & 15)) | (x >> (-r & 15)));
}
static uint8_t rotr8(uint8_t x, unsigned r) { return (uint8_t)((x >> (r & 7)) | (x << (-r & 7))); }

static uint64_t naive_bswap64(uint64_t x) {
    uint64_t r = 0;
    for (int i = 0; i < 8; i++)
        r |= ((x >> (8 * i)) & 0xff) << (56 - 8 * i);
    return r;
}

static uint64_t bit_reverse(uint64_t x) {
    x = ((x >> 1) & 0x5555555555555555ULL) | ((x & 0x5555555555555555ULL) << 1);
    x = ((x >> 2) & 0x3333333333333333ULL) | ((x & 0x3333333333333333ULL) << 2);
    x = ((x >> 4) & 0x0f0f0f0f0f0f0f0fULL) | ((x & 0x0f0f0f0f0f0f0f0fULL) << 4);
    return __builtin_bswap64(x);
}

static uint64_t naive_bit_reverse(uint64_t x) {
    uint64_t r = 0;
    for (int i = 0; i < 64; i++)
        r |= ((x >> i) & 1) << (63 - i);
    return r;
}

static uint64_t next_pow2(uint64_t x) {
    if (x <= 1)
        return 1;
    return x > (1ULL << 63) ? 0 : 1ULL << (64 - __builtin_clzll(x - 1));
}

static uint64_t gray(uint64_t x) { return x ^ (x >> 1); }
static uint64_t gray_inverse(uint64_t g) {
    for (int s = 1; s < 64; s <<= 1)
        g ^= g >> s;
    return g;
}

static void finish(void) {
    printf("bits %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    exit(failures ? 1 : 3);
}

int main(int argc, char **argv) {
    long count = argc > 1 ? atol(argv[1]) : 1000;
    uint64_t h = 0, pop_total = 0;
    for (long i = 0; i < count; i++) {
        uint64_t x = next_u64();
        uint32_t x32 = (uint32_t)(x >> 16);
        unsigned r = (unsigned)(x >> 58) ^ (unsigned)i;

        int pc = __builtin_popcountll(x);
        CHECK(pc == naive_popcount(x));
        CHECK(__builtin_popcount(x32) == naive_popcount(x32));
        CHECK(__builtin_parityll(x) == (pc & 1));
        pop_total += (uint64_t)pc;
        if (x != 0) {
            CHECK(__builtin_clzll(x) == naive_clz(x));
            CHECK(__builtin_ctzll(x) == naive_ctz(x));
            CHECK(__builtin_ffsll((long long)x) == naive_ctz(x) + 1);
            CHECK((x & -x) == 1ULL << __builtin_ctzll(x));
            CHECK(__builtin_popcountll(x & (x - 1)) == pc - 1);
        } else {
            CHECK(__builtin_ffsll(0) == 0);
        }
        if (x32 != 0) {
            CHECK(__builtin_clz(x32) == naive_clz(x32) - 32);
            CHECK(__builtin_ctz(x32) == naive_ctz(x32));
        }
        CHECK(__builtin_clrsbll((long long)x) ==
              ((int64_t)x < 0 ? naive_clz(~x) : naive_clz(x)) - 1);
        CHECK(__builtin_bswap64(x) == naive_bswap64(x));
        CHECK(__builtin_bswap32(x32) == (uint32_t)(naive_bswap64(x32) >> 32));
        CHECK(__builtin_bswap16((uint16_t)x) == (uint16_t)(naive_bswap64((uint16_t)x) >> 48));
        CHECK(rotr64(rotl64(x, r), r) == x);
        CHECK(rotl64(x, r) == rotr64(x, 64 - (r & 63)));
        CHECK(bit_reverse(x) == naive_bit_reverse(x));
        CHECK(gray_inverse(gray(x)) == x);
        CHECK(__builtin_popcountll(gray(x) ^ gray(x + 1)) == 1);
        uint64_t np = next_pow2(x >> (r & 63));
        CHECK(np == 0 || (np & (np - 1)) == 0);

        h = rotl64(h, 5) ^ rotl64(x, r) ^ rotl32(x32, r);
        h = h * 0x100000001b3ULL + rotl16((uint16_t)x, r) + rotr8((uint8_t)x, r);
        h ^= bit_reverse(x) + gray(x) + np;
        h += (uint64_t)__builtin_clrsbll((long long)x) << 40;
    }
    printf("count=%ld popcount_total=%" PRIu64 " checksum=%016" PRIx64 "\n", count, pop_total, h);
    printf("next_pow2: %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", next_pow2(0),
           next_pow2(5), next_pow2(1ULL << 40), next_pow2((1ULL << 40) + 1));
    printf("bit_reverse(1)=%016" PRIx64 " bswap64=%016" PRIx64 " gray(255)=%" PRIu64 "\n",
           bit_reverse(1), __builtin_bswap64(0x0102030405060708ULL), gray(255));
    finish();
}
