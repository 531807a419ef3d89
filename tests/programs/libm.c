/* libm: the C library's math functions (sin cos tan atan2 exp log pow cbrt hypot erf lgamma
 * tgamma, in double and a few in float) on a grid of inputs, printed with %.17g. glibc and
 * musl may round differently, so each libc's output is compared only with its own.
 * Self-checks use identities with loose tolerances. Usage: libm [STEPS]. Exit code 0 when
 * every self-check passes. */
#include <math.h>
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

/* Equal values (also two infinities of one sign: tgamma and exp overflow beyond x ~ 171.6)
 * are close; otherwise relative to |b|. */
static int close_to(double a, double b, double tol) {
    return a == b || fabs(a - b) <= tol * (1 + fabs(b));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 24;
    /* Grid points are k/4 (exact), from -steps/4 to steps/4, plus a few special inputs. */
    for (int k = -steps; k <= steps; k++) {
        double x = k / 4.0;
        double s = sin(x), c = cos(x), t = tan(x);
        printf("x=%-6g sin %.17g cos %.17g tan %.17g\n", x, s, c, t);
        printf("        atan2(x,1.5) %.17g atan2(-1,x) %.17g exp %.17g cbrt %.17g\n", atan2(x, 1.5),
               atan2(-1.0, x), exp(x), cbrt(x));
        printf("        erf %.17g erfc %.17g hypot(x,3) %.17g tanh %.17g\n", erf(x), erfc(x),
               hypot(x, 3.0), tanh(x));
        CHECK(close_to(s * s + c * c, 1.0, 1e-15));
        CHECK(fabs(c) < 1e-3 || close_to(t, s / c, 1e-13));
        CHECK(close_to(cbrt(x) * cbrt(x) * cbrt(x), x, 1e-14));
        CHECK(close_to(erf(x) + erfc(x), 1.0, 1e-15));
        if (x > 0) {
            int sign = 0;
            double lg = lgamma(x);
            printf("        log %.17g log10 %.17g log2 %.17g pow(x,2.5) %.17g pow(2.5,x) %.17g\n",
                   log(x), log10(x), log2(x), pow(x, 2.5), pow(2.5, x));
            printf("        lgamma %.17g tgamma %.17g sqrt %.17g asinh %.17g\n", lg, tgamma(x),
                   sqrt(x), asinh(x));
            CHECK(close_to(exp(log(x)), x, 1e-15));
            CHECK(close_to(tgamma(x + 1), x * tgamma(x), 1e-13));
            CHECK(close_to(exp(lg), fabs(tgamma(x)), 1e-12));
            (void)sign;
        } else if (x < 0 && x != floor(x)) {
            printf("        tgamma %.17g lgamma %.17g\n", tgamma(x), lgamma(x));
        }
        if (fabs(x) <= 1) {
            printf("        asin %.17g acos %.17g atanh %.17g\n", asin(x), acos(x),
                   fabs(x) < 1 ? atanh(x) : 0.0);
            CHECK(close_to(asin(x) + acos(x), M_PI / 2, 1e-15));
        }
        float xf = (float)x;
        printf("        sinf %.9g cosf %.9g expf %.9g atanf %.9g\n", (double)sinf(xf), (double)cosf(xf),
               (double)expf(xf), (double)atanf(xf));
        CHECK(fabs((double)sinf(xf) - s) < 1e-6);
    }
    /* Large arguments and special values. */
    static const double big[] = {1e6, 1e22, 3.14159265358979323846, 1.5707963267948966, 710.0, -745.5, 1e-300};
    for (unsigned i = 0; i < sizeof big / sizeof big[0]; i++) {
        double x = big[i];
        printf("x=%.17g sin %.17g cos %.17g exp %.17g log %.17g\n", x, sin(x), cos(x), exp(x),
               x > 0 ? log(x) : 0.0);
    }
    printf("pow(-8,1/3) nan %d, pow(0,-1) %g, pow(-2,3) %g, pow(1,nan) %g, pow(nan,0) %g\n",
           isnan(pow(-8, 1.0 / 3)), pow(0, -1), pow(-2, 3), pow(1, NAN), pow(NAN, 0));
    printf("log(0) %g, log(-1) nan %d, exp(-inf) %g, atan2(0,-0) %.17g, hypot(inf,nan) %g\n", log(0.0),
           isnan(log(-1.0)), exp(-INFINITY), atan2(0.0, -0.0), hypot(INFINITY, NAN));
    printf("lgamma(-0.5) %.17g tgamma(0.5)^2 %.17g tgamma(171.5) %g tgamma(-1) nan %d\n", lgamma(-0.5),
           tgamma(0.5) * tgamma(0.5), tgamma(171.5), isnan(tgamma(-1.0)));
    CHECK(close_to(tgamma(0.5) * tgamma(0.5), M_PI, 1e-15));
    CHECK(pow(-2, 3) == -8 && pow(1, NAN) == 1 && pow(NAN, 0) == 1 && isinf(pow(0, -1)));
    CHECK(close_to(atan2(0.0, -0.0), M_PI, 0) && exp(-INFINITY) == 0);
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
