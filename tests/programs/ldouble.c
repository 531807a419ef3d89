/* ldouble: 80-bit long double (x87) arithmetic: sums, products, division, sqrtl, powl,
 * expl/logl, conversions to and from integers and doubles, and printf of long doubles with
 * %Lf %Le %Lg %La. Usage: ldouble [N]. Exit code 0 when every self-check passes.
 * (glibc and musl print %La differently; each libc's output is compared with its own.) */
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

/* The 80-bit encoding: sign/exponent word and 64-bit significand. */
static void ld_bits(long double x, uint16_t *se, uint64_t *m) {
    unsigned char b[sizeof(long double)];
    memcpy(b, &x, sizeof b);
    memcpy(m, b, 8);
    memcpy(se, b + 8, 2);
}
static void show(const char *what, long double x) {
    uint16_t se;
    uint64_t m;
    ld_bits(x, &se, &m);
    printf("%-18s %04" PRIx16 ":%016" PRIx64 "  %.21Lg  %La\n", what, se, m, x, x);
}

static volatile long double vl[8];

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5000;
    printf("LDBL_MANT_DIG %d LDBL_EPSILON %Lg LDBL_MAX %Lg LDBL_MIN %Lg\n", LDBL_MANT_DIG, LDBL_EPSILON,
           LDBL_MAX, LDBL_MIN);
    CHECK(LDBL_MANT_DIG == 64);

    /* Harmonic sum in long double vs double. */
    long double hs = 0;
    double hd = 0;
    for (int i = 1; i <= n; i++) {
        hs += 1.0L / i;
        hd += 1.0 / i;
    }
    show("harmonic", hs);
    printf("harmonic(%d) ld %.21Lf d %.17f\n", n, hs, hd);
    CHECK(fabsl(hs - (long double)hd) < 1e-11L);

    /* Factorials exactly representable up to 25! in 64 bits of significand? Check 20!. */
    long double f = 1;
    for (int i = 1; i <= 20; i++) f *= i;
    show("20!", f);
    CHECK((uint64_t)f == 2432902008176640000ULL);
    for (int i = 21; i <= 1754; i++) f *= i;
    show("1754!", f);
    CHECK(!isinf(f) && f > 1e4930L);
    f *= 1755;
    CHECK(isinf(f));

    vl[0] = 1;
    vl[1] = 3;
    vl[2] = 2;
    vl[3] = 10;
    long double third = vl[0] / vl[1];
    show("1/3", third);
    long double r2 = sqrtl(vl[2]);
    show("sqrtl(2)", r2);
    CHECK(fabsl(r2 * r2 - 2) <= 4 * LDBL_EPSILON);
    long double tenth = vl[0] / vl[3];
    show("0.1L", tenth);
    CHECK(tenth == 0.1L);
    show("powl(2,0.5)", powl(vl[2], 0.5L));
    show("powl(10,-3)", powl(vl[3], -3));
    show("powl(3,40)", powl(vl[1], 40));
    CHECK(powl(vl[1], 40) == 12157665459056928801.0L);
    show("expl(1)", expl(vl[0]));
    show("logl(10)", logl(vl[3]));
    show("log2l(3)", log2l(vl[1]));
    show("expl(-11000)", expl(-11000.0L));
    CHECK(fabsl(expl(vl[0]) - 2.718281828459045235360287L) < 4 * LDBL_EPSILON * 3);
    CHECK(fabsl(logl(expl(vl[1])) - 3) < 8 * LDBL_EPSILON);
    show("fabsl(-2)", fabsl(-vl[2]));
    show("floorl(-1/3)", floorl(-third));
    show("rintl(2.5)", rintl(vl[2] + 0.5L));
    show("fmodl(10,3)", fmodl(vl[3], vl[1]));

    /* Conversions. */
    volatile int64_t big = 0x7fffffffffffffffLL;
    volatile uint64_t ubig = 0xffffffffffffffffULL;
    long double lb = big, lub = ubig;
    show("(ld)INT64_MAX", lb);
    show("(ld)UINT64_MAX", lub);
    CHECK((int64_t)lb == big && (uint64_t)lub == ubig);
    vl[4] = -9223372036854775808.0L;
    CHECK((int64_t)vl[4] == INT64_MIN);
    vl[5] = 1e30L;
    printf("(int64)1e30L = %" PRId64 ", (int32)-2.9L = %d, (uint64)1.8e19L = %" PRIu64 "\n",
           (int64_t)vl[5], (int)(vl[4] / 3.18e18L), (uint64_t)(vl[5] / 1e30L * 1.8e19L));
    double d = (double)third;
    float fl = (float)third;
    printf("(double)1/3L = %.17g (float)1/3L = %.9g\n", d, (double)fl);
    CHECK(d == 1.0 / 3.0);
    long double back = d;
    CHECK(back != third);
    vl[6] = 1.0L + LDBL_EPSILON;
    CHECK((double)vl[6] == 1.0);
    CHECK(vl[6] != 1.0L);

    /* Rounding modes with x87 arithmetic. */
    static const int modes[4] = {FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO};
    long double rm[4][2];
    for (int m = 0; m < 4; m++) {
        fesetround(modes[m]);
        rm[m][0] = vl[0] / vl[1];
        rm[m][1] = -vl[0] / vl[1];
        fesetround(FE_TONEAREST);
    }
    for (int m = 0; m < 4; m++) {
        show("1/3 in mode", rm[m][0]);
        show("-1/3 in mode", rm[m][1]);
    }
    CHECK(rm[1][0] < rm[2][0] && rm[3][1] == rm[2][1]);

    /* Printing. */
    static const long double xs[] = {0.1L, 1.0L / 3, 1e-400L, 1e400L, 12345678901234567890.0L, -0.0L, 0.5L};
    for (unsigned i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        /* %Lf of 1e4000L would print 4000 digits: only for moderate values. */
        if (fabsl(xs[i]) < 1e30L && fabsl(xs[i]) > 1e-30L)
            printf("%%Lf %.25Lf | ", xs[i]);
        printf("%%Le %.25Le | %%Lg %Lg\n", xs[i], xs[i]);
    }
    printf("%.70Lf\n", 0.1L);
    printf("inf %Lf %Le nan %Lf\n", (long double)INFINITY, -(long double)INFINITY, fabsl((long double)NAN));
    long double parsed = strtold("0.1", NULL);
    CHECK(parsed == 0.1L);
    char buf[80];
    snprintf(buf, sizeof buf, "%.21Lg", 1.0L / 3);
    CHECK(strtold(buf, NULL) == 1.0L / 3);
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
