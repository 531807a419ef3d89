/* mandel: the Mandelbrot set in double precision, printed as ASCII art with iteration counts
 * (integer output), plus a checksum of all iteration counts. Usage: mandel [WIDTH]. Exit code
 * 0 when the self-checks pass. */
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

#define MAXIT 200

static int iterate(double cr, double ci) {
    double zr = 0, zi = 0, zr2 = 0, zi2 = 0;
    int it = 0;
    while (it < MAXIT && zr2 + zi2 <= 4.0) {
        zi = 2 * zr * zi + ci;
        zr = zr2 - zi2 + cr;
        zr2 = zr * zr;
        zi2 = zi * zi;
        it++;
    }
    return it;
}

int main(int argc, char **argv) {
    int w = argc > 1 ? atoi(argv[1]) : 48;
    int h = w / 2;
    static const char shades[] = " .:-=+*#%@";
    uint64_t sum = 0, inside = 0;
    char *line = malloc(w + 1);
    for (int y = 0; y < h; y++) {
        /* Grid steps are multiples of 1/32 of the width so coordinates are exact. */
        double ci = -1.125 + 2.25 * y / h;
        for (int x = 0; x < w; x++) {
            double cr = -2.25 + 3.0 * x / w;
            int it = iterate(cr, ci);
            sum = sum * 31 + (uint64_t)it;
            inside += it == MAXIT;
            line[x] = it == MAXIT ? '@' : shades[it % 9];
        }
        line[w] = 0;
        printf("%s\n", line);
    }
    printf("checksum %016llx inside %llu\n", (unsigned long long)sum, (unsigned long long)inside);
    CHECK(iterate(0, 0) == MAXIT && iterate(-1, 0) == MAXIT && iterate(1, 1) < 5);
    CHECK(inside > 0 && inside < (uint64_t)w * h / 2);
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
