/* vecint: loops that gcc auto-vectorises at -O2/-O3 (SSE2, or AVX2 with -march=x86-64-v3):
 * int/short/char array sums, min/max, dot products, element-wise operations, byte counting,
 * and a saxpy in float with exactly representable values. Each vectorised result is checked
 * against a scalar loop the compiler may not vectorise (volatile index). Usage: vecint [N].
 * Exit code 0 when every self-check passes. */
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

#define N_MAX 4099

static int32_t ia[N_MAX], ib[N_MAX], ic[N_MAX];
static int16_t sa[N_MAX], sb[N_MAX], sc[N_MAX];
static int8_t ca[N_MAX];
static uint8_t ua[N_MAX], ub[N_MAX];
static float fx[N_MAX], fy[N_MAX];
static uint32_t ux[N_MAX];

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Scalar reference helpers: the volatile step keeps them scalar. */
static volatile int one = 1;

__attribute__((noinline)) static int64_t sum_i32(const int32_t *a, int n) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}
__attribute__((noinline)) static int32_t sum_i32_wrap(const int32_t *a, int n) {
    uint32_t s = 0;
    for (int i = 0; i < n; i++) s += (uint32_t)a[i];
    return (int32_t)s;
}
__attribute__((noinline)) static int32_t sum_i16(const int16_t *a, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}
__attribute__((noinline)) static uint32_t sum_u8(const uint8_t *a, int n) {
    uint32_t s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}
__attribute__((noinline)) static int32_t max_i32(const int32_t *a, int n) {
    int32_t m = INT32_MIN;
    for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
    return m;
}
__attribute__((noinline)) static int16_t min_i16(const int16_t *a, int n) {
    int16_t m = INT16_MAX;
    for (int i = 0; i < n; i++) m = a[i] < m ? a[i] : m;
    return m;
}
__attribute__((noinline)) static int8_t max_i8(const int8_t *a, int n) {
    int8_t m = INT8_MIN;
    for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
    return m;
}
__attribute__((noinline)) static uint8_t max_u8(const uint8_t *a, int n) {
    uint8_t m = 0;
    for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
    return m;
}
__attribute__((noinline)) static int64_t dot_i16(const int16_t *a, const int16_t *b, int n) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += (int32_t)a[i] * b[i];
    return s;
}
__attribute__((noinline)) static void add_mul(int32_t *c, const int32_t *a, const int32_t *b, int n) {
    for (int i = 0; i < n; i++)
        c[i] = (int32_t)((uint32_t)a[i] * 3u + (uint32_t)(b[i] >> 2) - (uint32_t)(a[i] & b[i]));
}
__attribute__((noinline)) static void sat_add_u8(uint8_t *c, const uint8_t *a, const uint8_t *b, int n) {
    for (int i = 0; i < n; i++) {
        unsigned v = (unsigned)a[i] + b[i];
        c[i] = v > 255 ? 255 : (uint8_t)v;
    }
}
__attribute__((noinline)) static void abs_diff_i16(int16_t *c, const int16_t *a, const int16_t *b, int n) {
    for (int i = 0; i < n; i++) {
        int d = a[i] - b[i];
        c[i] = (int16_t)(d < 0 ? -d : d);
    }
}
__attribute__((noinline)) static int count_eq(const uint8_t *a, uint8_t v, int n) {
    int c = 0;
    for (int i = 0; i < n; i++) c += a[i] == v;
    return c;
}
__attribute__((noinline)) static void saxpy(float *y, const float *x, float a, int n) {
    for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
__attribute__((noinline)) static void shifts_u32(uint32_t *x, int n) {
    for (int i = 0; i < n; i++) x[i] = (x[i] << 3) ^ (x[i] >> 5) ^ (x[i] * 0x9e3779b1u);
}
__attribute__((noinline)) static void widen_i8(int32_t *c, const int8_t *a, int n) {
    for (int i = 0; i < n; i++) c[i] = a[i] * a[i] - a[i];
}

static uint64_t fnv(const void *p, size_t len) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (n > N_MAX) n = N_MAX;
    for (int i = 0; i < N_MAX; i++) {
        ia[i] = (int32_t)rnd() - (int32_t)(rnd() >> 1);
        ib[i] = (int32_t)(rnd() % 200001) - 100000;
        sa[i] = (int16_t)rnd();
        sb[i] = (int16_t)(rnd() % 2001 - 1000);
        ca[i] = (int8_t)rnd();
        ua[i] = (uint8_t)rnd();
        ub[i] = (uint8_t)(rnd() % 7);
        fx[i] = (float)((int)(rnd() % 1025) - 512) / 4.0f;
        fy[i] = (float)((int)(rnd() % 257) - 128);
        ux[i] = rnd();
    }
    /* Odd lengths exercise the scalar tail of each vector loop. */
    static const int lens[] = {0, 1, 3, 7, 15, 16, 17, 31, 33, 100, 1000, 4099};
    for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int len = lens[li] < n ? lens[li] : n;
        int64_t r_s32 = 0, r_d16 = 0;
        int32_t r_w32 = 0, r_m32 = INT32_MIN, r_s16 = 0;
        int16_t r_mi16 = INT16_MAX;
        int8_t r_m8 = INT8_MIN;
        uint8_t r_mu8 = 0;
        uint32_t r_u8 = 0;
        int r_eq = 0;
        for (int i = 0; i < len; i += one) {
            r_s32 += ia[i];
            r_w32 = (int32_t)((uint32_t)r_w32 + (uint32_t)ia[i]);
            r_s16 += sa[i];
            r_u8 += ua[i];
            if (ia[i] > r_m32) r_m32 = ia[i];
            if (sa[i] < r_mi16) r_mi16 = sa[i];
            if (ca[i] > r_m8) r_m8 = ca[i];
            if (ua[i] > r_mu8) r_mu8 = ua[i];
            r_d16 += (int32_t)sa[i] * sb[i];
            r_eq += ub[i] == 3;
        }
        int64_t s32 = sum_i32(ia, len), d16 = dot_i16(sa, sb, len);
        int32_t w32 = sum_i32_wrap(ia, len), m32 = max_i32(ia, len), s16 = sum_i16(sa, len);
        int16_t mi16 = min_i16(sa, len);
        int8_t m8 = max_i8(ca, len);
        uint8_t mu8 = max_u8(ua, len);
        uint32_t u8 = sum_u8(ua, len);
        int eq = count_eq(ub, 3, len);
        printf("len %4d: sum32 %" PRId64 " wrap %" PRId32 " max32 %" PRId32 " sum16 %" PRId32
               " min16 %d max8 %d maxu8 %u sumu8 %" PRIu32 " dot16 %" PRId64 " eq3 %d\n",
               len, s32, w32, m32, s16, mi16, m8, mu8, u8, d16, eq);
        CHECK(s32 == r_s32 && w32 == r_w32 && m32 == r_m32 && s16 == r_s16 && mi16 == r_mi16);
        CHECK(m8 == r_m8 && mu8 == r_mu8 && u8 == r_u8 && d16 == r_d16 && eq == r_eq);
    }
    /* Element-wise loops, checked against scalar recomputation. */
    add_mul(ic, ia, ib, n);
    sat_add_u8(ub, ua, ub, n); /* in place on one input */
    abs_diff_i16(sc, sa, sb, n);
    int bad = 0;
    for (int i = 0; i < n; i += one)
        if (ic[i] != (int32_t)((uint32_t)ia[i] * 3u + (uint32_t)(ib[i] >> 2) - (uint32_t)(ia[i] & ib[i])))
            bad++;
    widen_i8(ib, ca, n);
    for (int i = 0; i < n; i += one) {
        int d = sa[i] - sb[i];
        if (sc[i] != (int16_t)(d < 0 ? -d : d)) bad++;
        if (ib[i] != ca[i] * ca[i] - ca[i]) bad++;
    }
    CHECK(bad == 0);
    printf("add_mul %016" PRIx64 " satadd %016" PRIx64 " absdiff %016" PRIx64 " widen %016" PRIx64 "\n",
           fnv(ic, sizeof(int32_t) * n), fnv(ub, (size_t)n), fnv(sc, sizeof(int16_t) * n),
           fnv(ib, sizeof(int32_t) * n));
    /* saxpy: values are multiples of 1/4 below 2^12 and a = 1.5, so every result is exact
     * with or without a fused multiply-add. */
    float y0[N_MAX];
    memcpy(y0, fy, sizeof y0);
    saxpy(fy, fx, 1.5f, n);
    bad = 0;
    double fs = 0;
    for (int i = 0; i < n; i += one) {
        if (fy[i] != 1.5f * fx[i] + y0[i]) bad++;
        fs += fy[i];
    }
    printf("saxpy sum %.9g hash %016" PRIx64 "\n", fs, fnv(fy, sizeof(float) * n));
    CHECK(bad == 0);
    shifts_u32(ux, n);
    printf("shifts %016" PRIx64 "\n", fnv(ux, sizeof(uint32_t) * n));
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
