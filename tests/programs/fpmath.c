/* fpmath: double and float arithmetic through SSE: Kahan and naive sums, products, division,
 * sqrt, fabs, fmin/fmax, the rounding functions, all four rounding modes (fesetround),
 * int <-> float conversion edge cases, and printf of doubles (%f %e %g %a, many digits,
 * infinities and NaNs). Usage: fpmath [N]. Exit code 0 when every self-check passes. */
#include <fenv.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
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

static uint64_t bits_of(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
static double from_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
static uint32_t fbits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Prevents constant folding: every operand goes through memory. */
static volatile double vd[16];
static volatile float vf[16];

static void sums(int n) {
    double naive = 0, kahan = 0, c = 0;
    float fnaive = 0;
    for (int i = 1; i <= n; i++) {
        double x = 1.0 / i;
        naive += x;
        fnaive += (float)x;
        double y = x - c;
        double t = kahan + y;
        c = (t - kahan) - y;
        kahan = t;
    }
    printf("harmonic(%d): naive %.17g kahan %.17g float %.9g\n", n, naive, kahan, (double)fnaive);
    CHECK(fabs(naive - kahan) < 1e-12);
    /* 0.1 added ten thousand times. */
    double s = 0, k = 0;
    c = 0;
    for (int i = 0; i < 10000; i++) {
        s += 0.1;
        double y = 0.1 - c;
        double t = k + y;
        c = (t - k) - y;
        k = t;
    }
    printf("0.1 x 10000: naive %.17g kahan %.17g\n", s, k);
    CHECK(k == 1000.0 || fabs(k - 1000.0) <= 1e-12);
    CHECK(s != 1000.0);
}

static void products(void) {
    double p = 1;
    for (int i = 1; i <= 170; i++) p *= i;
    printf("170! = %.17g\n", p);
    CHECK(p > 7.25e306 && p < 7.26e306);
    p *= 171;
    printf("171! = %g (isinf %d)\n", p, isinf(p) != 0);
    CHECK(isinf(p));
    double q = 1;
    for (int i = 0; i < 1074; i++) q /= 2;
    printf("2^-1074 = %.17g bits %016" PRIx64 "\n", q, bits_of(q));
    CHECK(bits_of(q) == 1);
    q /= 2;
    CHECK(q == 0);
    float f = 1;
    for (int i = 1; i <= 34; i++) f *= (float)i;
    printf("34! float = %.9g bits %08" PRIx32 "\n", (double)f, fbits_of(f));
    f *= 35.0f;
    CHECK(isinf(f));
}

static void division_and_sqrt(void) {
    vd[0] = 1.0;
    vd[1] = 3.0;
    vd[2] = 2.0;
    vd[3] = -0.0;
    vd[4] = 0.0;
    double third = vd[0] / vd[1];
    printf("1/3 = %.20f %a\n", third, third);
    CHECK(bits_of(third) == 0x3fd5555555555555ULL);
    double r2 = sqrt(vd[2]);
    printf("sqrt(2) = %.17g %a\n", r2, r2);
    CHECK(bits_of(r2) == 0x3ff6a09e667f3bcdULL);
    CHECK(r2 * r2 != 2.0);
    double nz = sqrt(vd[3]);
    printf("sqrt(-0) = %g signbit %d\n", nz, signbit(nz) != 0);
    CHECK(signbit(nz));
    double inf = vd[0] / vd[4];
    double ninf = vd[0] / vd[3];
    double nan1 = vd[4] / vd[4];
    printf("1/0 = %f, 1/-0 = %f, 0/0 is nan %d, sqrt(-1) is nan %d\n", inf, ninf, isnan(nan1) != 0,
           isnan(sqrt(-vd[0])) != 0);
    CHECK(isinf(inf) && inf > 0 && isinf(ninf) && ninf < 0 && isnan(nan1));
    vf[0] = 2.0f;
    vf[1] = 10.0f;
    float sf = sqrtf(vf[0]);
    float df = vf[0] / vf[1];
    printf("sqrtf(2) = %.9g (%08" PRIx32 "), 2f/10f = %.9g (%08" PRIx32 ")\n", (double)sf,
           fbits_of(sf), (double)df, fbits_of(df));
    CHECK(fbits_of(sf) == 0x3fb504f3u && fbits_of(df) == 0x3e4ccccdu);
    /* Newton's sqrt agrees with sqrt to within an ulp. */
    for (int i = 1; i < 200; i += 7) {
        double x = i * 1.37, g = x;
        for (int k = 0; k < 60; k++) g = 0.5 * (g + x / g);
        CHECK(fabs(g - sqrt(x)) <= 2 * DBL_EPSILON * sqrt(x));
    }
}

static void minmax_abs(void) {
    vd[0] = -2.5;
    vd[1] = 3.25;
    vd[2] = NAN;
    vd[3] = -0.0;
    vd[4] = 0.0;
    printf("fabs(-2.5)=%g fmin=%g fmax=%g\n", fabs(vd[0]), fmin(vd[0], vd[1]), fmax(vd[0], vd[1]));
    printf("fmin(nan,3.25)=%g fmax(-2.5,nan)=%g\n", fmin(vd[2], vd[1]), fmax(vd[0], vd[2]));
    CHECK(fmin(vd[2], vd[1]) == 3.25 && fmax(vd[0], vd[2]) == -2.5);
    CHECK(fabs(vd[0]) == 2.5 && fmin(vd[0], vd[1]) == -2.5 && fmax(vd[0], vd[1]) == 3.25);
    CHECK(!signbit(fabs(vd[3])));
    printf("copysign(3,-0)=%g fdim(5,3)=%g fmod(10.5,3)=%g remainder(10.5,3)=%g\n",
           copysign(3.0, vd[3]), fdim(5.0, vd[1] - 0.25), fmod(vd[1] * 3.0 + 0.75, 3.0),
           remainder(10.5, vd[1] - 0.25));
}

static const double round_inputs[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999999999999996, 0.49999999999999994,
                                      -3.7, 3.7, 1e15 + 0.5, 4503599627370495.5, -4503599627370497.0,
                                      1e300, -0.0, 7.0};
#define NROUND (int)(sizeof round_inputs / sizeof round_inputs[0])

static void rounding_functions(void) {
    printf("%-24s %8s %8s %8s %8s %8s %8s %8s\n", "x", "floor", "ceil", "round", "trunc", "rint",
           "nearby", "lround");
    for (int i = 0; i < NROUND; i++) {
        vd[0] = round_inputs[i];
        double x = vd[0];
        printf("%-24.17g %8.6g %8.6g %8.6g %8.6g %8.6g %8.6g %8ld\n", x, floor(x), ceil(x),
               round(x), trunc(x), rint(x), nearbyint(x), fabs(x) < 1e18 ? lround(x) : 0L);
        CHECK(floor(x) <= x && ceil(x) >= x && fabs(trunc(x)) <= fabs(x));
        CHECK(rint(x) == nearbyint(x));
    }
    vf[0] = 2.5f;
    vf[1] = -1.25f;
    printf("floorf(-1.25)=%g ceilf=%g roundf(2.5)=%g rintf(2.5)=%g truncf(-1.25)=%g\n",
           (double)floorf(vf[1]), (double)ceilf(vf[1]), (double)roundf(vf[0]), (double)rintf(vf[0]),
           (double)truncf(vf[1]));
    CHECK(rint(2.5) == 2 && round(2.5) == 3 && rint(-2.5) == -2 && floor(-0.5) == -1);
}

static const int modes[4] = {FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO};
static const char *const mode_names[4] = {"nearest", "down", "up", "zero"};

static void rounding_modes(void) {
    double res[4][8];
    float fres[4][2];
    vd[0] = 1.0;
    vd[1] = 3.0;
    vd[2] = -1.0;
    vd[3] = 2.0;
    vd[4] = 2.5;
    vd[5] = -2.5;
    vd[6] = 1e308;
    vd[7] = 0.1;
    vf[0] = 1.0f;
    vf[1] = 3.0f;
    volatile int64_t vi64 = 9007199254740993LL;
    for (int m = 0; m < 4; m++) {
        CHECK(fesetround(modes[m]) == 0);
        CHECK(fegetround() == modes[m]);
        res[m][0] = vd[0] / vd[1];
        res[m][1] = vd[2] / vd[1];
        res[m][2] = sqrt(vd[3]);
        res[m][3] = rint(vd[4]);
        res[m][4] = nearbyint(vd[5]);
        res[m][5] = vd[6] * 10.0;
        res[m][6] = vd[7] + vd[0];
        res[m][7] = (double)vi64; /* int64 -> double rounds */
        fres[m][0] = vf[0] / vf[1];
        fres[m][1] = (float)vd[7];
        res[m][7] += 0 * llrint(vd[4]);
        vd[8] = (double)llrint(vd[4]);
        res[m][3] += 0 * vd[8];
        fesetround(FE_TONEAREST);
        printf("mode %-7s llrint(2.5)=%g\n", mode_names[m], vd[8]);
    }
    for (int m = 0; m < 4; m++) {
        printf("mode %-7s 1/3=%a -1/3=%a sqrt2=%a rint(2.5)=%g nearbyint(-2.5)=%g 1e308*10=%g "
               "0.1+1=%a 2^53+1=%.17g 1f/3f=%a (float)0.1=%a\n",
               mode_names[m], res[m][0], res[m][1], res[m][2], res[m][3], res[m][4], res[m][5],
               res[m][6], res[m][7], (double)fres[m][0], (double)fres[m][1]);
    }
    CHECK(res[1][0] < res[2][0] && res[3][0] == res[1][0] && res[0][0] == res[1][0]);
    CHECK(res[1][7] == 9007199254740992.0 && res[2][7] == 9007199254740994.0);
    CHECK(res[1][1] < res[2][1] && res[3][1] == res[2][1]);
    CHECK(res[1][3] == 2 && res[2][3] == 3 && res[3][3] == 2 && res[0][3] == 2);
    CHECK(isinf(res[0][5]) && isinf(res[2][5]) && res[1][5] == DBL_MAX && res[3][5] == DBL_MAX);
    CHECK(fres[1][0] < fres[2][0]);
}

static void conversions(void) {
    static const double ds[] = {0.0, -0.0, 0.9999999999999999, -1.9999999999999998, 2147483647.0,
                                2147483647.5, -2147483648.0, 4294967295.0, 9007199254740993.0,
                                9.2233720368547748e18, -9.2233720368547758e18, 1.8446744073709550e19,
                                123456789.987654321};
    for (unsigned i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        vd[0] = ds[i];
        double x = vd[0];
        int64_t s = (int64_t)x;
        int32_t s32 = (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : -1;
        uint64_t u = x >= 0 && x < 18446744073709551616.0 ? (uint64_t)x : 0;
        float f = (float)x;
        printf("%.17g -> i64 %" PRId64 " i32 %" PRId32 " u64 %" PRIu64 " f32 %.9g (%08" PRIx32 ")\n",
               x, s, s32, u, (double)f, fbits_of(f));
    }
    static const uint64_t us[] = {0, 1, 9007199254740993ULL, 0x7fffffffffffffffULL,
                                  0x8000000000000000ULL, 0x8000000000000401ULL, 0xffffffffffffffffULL,
                                  0xfffffffffffff7ffULL};
    for (unsigned i = 0; i < sizeof us / sizeof us[0]; i++) {
        volatile uint64_t v = us[i];
        double d = (double)v;
        double ds2 = (double)(int64_t)v;
        float f = (float)v;
        printf("u64 %" PRIu64 " -> %.17g (%016" PRIx64 ") as i64 -> %.17g, f32 %.9g\n", (uint64_t)v, d,
               bits_of(d), ds2, (double)f);
    }
    volatile int32_t i32 = INT32_MIN;
    volatile uint32_t u32 = 0xffffffffu;
    printf("i32 min -> %.17g, u32 max -> %.17g, f32 %.9g\n", (double)i32, (double)u32,
           (double)(float)u32);
    CHECK((double)i32 == -2147483648.0 && (double)u32 == 4294967295.0);
    CHECK((double)(uint64_t)0xffffffffffffffffULL == 18446744073709551616.0);
    /* float <-> double */
    vd[0] = 1e-40; /* subnormal as float */
    float sub = (float)vd[0];
    printf("(float)1e-40 = %.9g (%08" PRIx32 "), back %.17g\n", (double)sub, fbits_of(sub), (double)sub);
    CHECK(fbits_of(sub) == 0x000116c2u);
    vd[0] = 3.4028235677973366e38; /* rounds to inf as float */
    printf("(float)3.4028235677973366e38 = %g\n", (double)(float)vd[0]);
    CHECK(isinf((float)vd[0]));
}

static void printing(void) {
    static const double xs[] = {0.1, 1.0 / 3, 2.0 / 3, 1e-300, 5e-324, 2.2250738585072014e-308,
                                1.7976931348623157e308, 123456789012345678.0, 0.5, 1e21, 1e-7,
                                -0.0, 100.0, 9.999999999999999e22};
    for (unsigned i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        printf("%%f %f | %%.3e %.3e | %%g %g | %%.17g %.17g | %%.0f %.0f\n", x, x, x, x, x);
        /* glibc and musl print subnormals differently with %a. */
        if (fpclassify(x) == FP_SUBNORMAL)
            printf("   %%.25e %.25e | bits %016" PRIx64 "\n", x, bits_of(x));
        else
            printf("   %%.25e %.25e | %%a %a | %%.3a %.3a\n", x, x, x);
    }
    printf("%.60f\n", 0.1);
    printf("%.40f\n", 1.0 / 3);
    printf("%.330f\n", 1e-320);
    printf("%f\n", 1.7976931348623157e308);
    printf("%10.4f|%-10.2e|%+g|% g|%#g|%#.0f|%010.3f\n", 3.14159265, 2718.28, 1.5, 1.5, 2.0, 3.0, -2.5);
    double inf = INFINITY, nan1 = NAN;
    printf("inf: %f %e %g %a %F %E %G %A %5.1f|%-6f|\n", inf, inf, inf, inf, inf, inf, inf, inf, inf, -inf);
    printf("nan: %f %e %g %F\n", fabs(nan1), fabs(nan1), fabs(nan1), fabs(nan1));
    printf("-inf %f, -nan signbit %d\n", -inf, signbit(-nan1) != 0);
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", 0.1);
    CHECK(strcmp(buf, "0.10000000000000001") == 0);
    CHECK(strtod("0x1.8p1", NULL) == 3.0 && strtod("1e-320", NULL) > 0 && strtod("inf", NULL) == inf);
    double back = strtod("2.2250738585072011e-308", NULL);
    printf("strtod(2.2250738585072011e-308) = %016" PRIx64 "\n", bits_of(back));
    /* printf/strtod round trip */
    uint64_t st = 88172645463325252ULL;
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        double d = from_bits(st & 0x7fefffffffffffffULL);
        snprintf(buf, sizeof buf, "%.17g", d);
        if (bits_of(strtod(buf, NULL)) != bits_of(d)) bad++;
    }
    printf("round trips failed: %d\n", bad);
    CHECK(bad == 0);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    sums(n);
    products();
    division_and_sqrt();
    minmax_abs();
    rounding_functions();
    rounding_modes();
    conversions();
    printing();
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
