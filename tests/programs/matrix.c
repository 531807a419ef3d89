/* matrix: double-precision linear algebra with loops the compiler can vectorise: matrix
 * multiply (naive and transposed), LU decomposition with partial pivoting, solving A x = b,
 * determinant, and the residual check. Usage: matrix [N]. Exit code 0 when every self-check
 * passes. */
#include <math.h>
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

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
/* Small integers over 8: products and short sums are exact, so results do not depend on
 * whether the compiler fuses multiply-adds. */
static double next_val(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)((int)((rng >> 33) % 17) - 8) / 8.0;
}

static void matmul(int n, const double *a, const double *b, double *c) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) c[i * n + j] = 0;
        for (int k = 0; k < n; k++) {
            double aik = a[i * n + k];
            for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
        }
    }
}

static void matmul_t(int n, const double *a, const double *b, double *c) {
    double *bt = malloc(sizeof(double) * n * n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) bt[j * n + i] = b[i * n + j];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += a[i * n + k] * bt[j * n + k];
            c[i * n + j] = s;
        }
    free(bt);
}

/* In-place LU with partial pivoting; returns the sign of the permutation, 0 if singular. */
static int lu(int n, double *a, int *piv) {
    int sign = 1;
    for (int i = 0; i < n; i++) piv[i] = i;
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(a[i * n + k]) > fabs(a[p * n + k])) p = i;
        if (a[p * n + k] == 0) return 0;
        if (p != k) {
            for (int j = 0; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
            int t = piv[k];
            piv[k] = piv[p];
            piv[p] = t;
            sign = -sign;
        }
        double inv = 1.0 / a[k * n + k];
        for (int i = k + 1; i < n; i++) {
            double l = a[i * n + k] * inv;
            a[i * n + k] = l;
            for (int j = k + 1; j < n; j++) a[i * n + j] -= l * a[k * n + j];
        }
    }
    return sign;
}

static void lu_solve(int n, const double *lu_, const int *piv, const double *b, double *x) {
    for (int i = 0; i < n; i++) {
        double s = b[piv[i]];
        for (int j = 0; j < i; j++) s -= lu_[i * n + j] * x[j];
        x[i] = s;
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = x[i];
        for (int j = i + 1; j < n; j++) s -= lu_[i * n + j] * x[j];
        x[i] = s / lu_[i * n + i];
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 24;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    double *c1 = calloc((size_t)n * n, sizeof(double)), *c2 = calloc((size_t)n * n, sizeof(double));
    double *f = malloc(sizeof(double) * n * n);
    double *x = malloc(sizeof(double) * n), *rhs = malloc(sizeof(double) * n);
    int *piv = malloc(sizeof(int) * n);
    for (int i = 0; i < n * n; i++) {
        a[i] = next_val();
        b[i] = next_val();
    }
    for (int i = 0; i < n; i++) a[i * n + i] += n / 4.0; /* diagonally heavier */
    matmul(n, a, b, c1);
    matmul_t(n, a, b, c2);
    double trace = 0, sum = 0;
    int same = 1;
    for (int i = 0; i < n * n; i++) {
        sum += c1[i];
        if (c1[i] != c2[i]) same = 0;
    }
    for (int i = 0; i < n; i++) trace += c1[i * n + i];
    printf("n=%d sum(AB) %.17g trace(AB) %.17g c[0][0] %.17g c[n-1][n-1] %.17g\n", n, sum, trace, c1[0],
           c1[n * n - 1]);
    CHECK(same); /* all products and partial sums are exact multiples of 1/64 */

    for (int i = 0; i < n * n; i++) f[i] = a[i];
    int sign = lu(n, f, piv);
    CHECK(sign != 0);
    double logdet = 0;
    int dsign = sign;
    for (int i = 0; i < n; i++) {
        logdet += log(fabs(f[i * n + i]));
        if (f[i * n + i] < 0) dsign = -dsign;
    }
    printf("det sign %d log|det| %.6f pivots:", dsign, logdet);
    for (int i = 0; i < n && i < 12; i++) printf(" %d", piv[i]);
    printf("\n");
    /* Solve A x = A * ones. */
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += a[i * n + j];
        rhs[i] = s;
    }
    lu_solve(n, f, piv, rhs, x);
    double err = 0;
    for (int i = 0; i < n; i++) err = fmax(err, fabs(x[i] - 1));
    printf("max |x-1| below 1e-12: %s\n", err < 1e-12 ? "yes" : "no");
    CHECK(err < 1e-12);
    /* Residual of L*U against the permuted A. */
    double res = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k <= i && k <= j; k++) s += (k == i ? 1.0 : f[i * n + k]) * f[k * n + j];
            res = fmax(res, fabs(s - a[piv[i] * n + j]));
        }
    printf("max |LU - PA| below 1e-12: %s\n", res < 1e-12 ? "yes" : "no");
    CHECK(res < 1e-12);
    /* Hilbert matrix condition makes the error grow: print it with few digits. */
    int h = 8;
    double *hm = malloc(sizeof(double) * h * h), *hx = malloc(sizeof(double) * h), *hb = malloc(sizeof(double) * h);
    int *hp = malloc(sizeof(int) * h);
    for (int i = 0; i < h; i++) {
        hb[i] = 0;
        for (int j = 0; j < h; j++) {
            hm[i * h + j] = 1.0 / (i + j + 1);
            hb[i] += hm[i * h + j];
        }
    }
    lu(h, hm, hp);
    lu_solve(h, hm, hp, hb, hx);
    double herr = 0;
    for (int i = 0; i < h; i++) herr = fmax(herr, fabs(hx[i] - 1));
    printf("hilbert(8) solve error below 1e-6: %s\n", herr < 1e-6 ? "yes" : "no");
    CHECK(herr < 1e-6 && herr > 0);
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
