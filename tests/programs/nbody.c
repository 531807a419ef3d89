/* nbody: a five-body gravity simulation in 32.32 fixed point (64-bit integers, 128-bit
 * products, integer square root) -- an integer-only stand-in for the classic nbody
 * benchmark. Usage: nbody [STEPS]. Exit code 0 when the self-checks pass. */
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

typedef int64_t fix; /* 32.32 fixed point */
#define ONE ((fix)1 << 32)
#define N 5

static fix fmul(fix a, fix b) { return (fix)(((__int128)a * b) >> 32); }
static fix fdiv(fix a, fix b) { return (fix)(((__int128)a << 32) / b); }

/* Integer square root of a 128-bit value by Newton's method. */
static uint64_t isqrt128(unsigned __int128 v) {
    if (v == 0)
        return 0;
    unsigned __int128 x = v, y = (x + 1) / 2;
    int bits = 0;
    for (unsigned __int128 t = v; t; t >>= 1)
        bits++;
    x = (unsigned __int128)1 << ((bits + 1) / 2); /* >= sqrt(v) */
    for (;;) {
        y = (x + v / x) / 2;
        if (y >= x)
            return (uint64_t)x;
        x = y;
    }
}

static fix fsqrt(fix a) { return (fix)isqrt128((unsigned __int128)a << 32); }

typedef struct {
    fix x, y, z, vx, vy, vz, m;
} body;

static fix energy(const body *b) {
    fix e = 0;
    for (int i = 0; i < N; i++) {
        fix v2 = fmul(b[i].vx, b[i].vx) + fmul(b[i].vy, b[i].vy) + fmul(b[i].vz, b[i].vz);
        e += fmul(b[i].m, v2) / 2;
        for (int j = i + 1; j < N; j++) {
            fix dx = b[i].x - b[j].x, dy = b[i].y - b[j].y, dz = b[i].z - b[j].z;
            fix d = fsqrt(fmul(dx, dx) + fmul(dy, dy) + fmul(dz, dz));
            e -= fdiv(fmul(b[i].m, b[j].m), d);
        }
    }
    return e;
}

static void step(body *b, fix dt) {
    for (int i = 0; i < N; i++) {
        for (int j = i + 1; j < N; j++) {
            fix dx = b[i].x - b[j].x, dy = b[i].y - b[j].y, dz = b[i].z - b[j].z;
            fix d2 = fmul(dx, dx) + fmul(dy, dy) + fmul(dz, dz) + ONE / 64; /* softening */
            fix d = fsqrt(d2);
            fix mag = fdiv(dt, fmul(d2, d));
            fix mi = fmul(b[i].m, mag), mj = fmul(b[j].m, mag);
            b[i].vx -= fmul(dx, mj);
            b[i].vy -= fmul(dy, mj);
            b[i].vz -= fmul(dz, mj);
            b[j].vx += fmul(dx, mi);
            b[j].vy += fmul(dy, mi);
            b[j].vz += fmul(dz, mi);
        }
    }
    for (int i = 0; i < N; i++) {
        b[i].x += fmul(dt, b[i].vx);
        b[i].y += fmul(dt, b[i].vy);
        b[i].z += fmul(dt, b[i].vz);
    }
}

/* Print a fixed-point value as a signed decimal with six fractional digits. */
static void print_fix(const char *name, fix v) {
    uint64_t mag = v < 0 ? -(uint64_t)v : (uint64_t)v;
    uint64_t ip = mag >> 32;
    uint64_t frac = (uint64_t)(((unsigned __int128)(mag & 0xffffffffu) * 1000000) >> 32);
    printf(" %s=%s%" PRIu64 ".%06" PRIu64, name, v < 0 ? "-" : "", ip, frac);
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 300;
    CHECK(isqrt128(0) == 0 && isqrt128(1) == 1 && isqrt128(15) == 3 && isqrt128(16) == 4);
    CHECK(isqrt128((unsigned __int128)UINT64_MAX * UINT64_MAX) == UINT64_MAX);
    CHECK(fsqrt(4 * ONE) == 2 * ONE && fmul(3 * ONE, ONE / 2) == 3 * ONE / 2);
    body b[N] = {
        {0, 0, 0, 0, 0, 0, 40 * ONE},
        {4 * ONE, 0, 0, 0, 3 * ONE, 0, ONE / 10},
        {-6 * ONE, 0, ONE / 2, 0, -5 * ONE / 2, ONE / 8, ONE / 20},
        {0, 9 * ONE, 0, -2 * ONE, 0, 0, ONE / 30},
        {0, -12 * ONE, -ONE, 7 * ONE / 4, 0, 0, ONE / 50},
    };
    fix e0 = energy(b);
    fix dt = ONE / 256;
    for (long s = 0; s < steps; s++)
        step(b, dt);
    fix e1 = energy(b);
    printf("steps=%ld", steps);
    print_fix("e0", e0);
    print_fix("e1", e1);
    printf("\n");
    for (int i = 0; i < N; i++) {
        printf("body%d", i);
        print_fix("x", b[i].x);
        print_fix("y", b[i].y);
        print_fix("z", b[i].z);
        printf("\n");
    }
    fix drift = e1 > e0 ? e1 - e0 : e0 - e1;
    CHECK(drift < (e0 < 0 ? -e0 : e0) / 20); /* energy roughly conserved */
    printf("nbody %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
