/* Demo program for README's first command: integer work and formatted output. */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ull; }
    return h;
}

int main(int argc, char **argv) {
    printf("hello from inside Lockstep: argc=%d\n", argc);
    for (int i = 1; i < argc; i++) printf("  argv[%d] = %s (fnv1a %016llx)\n", i, argv[i], (unsigned long long)fnv1a(argv[i]));
    unsigned primes = 0;
    for (unsigned n = 2; n < 20000; n++) {
        int p = 1;
        for (unsigned d = 2; d * d <= n; d++) if (n % d == 0) { p = 0; break; }
        primes += p;
    }
    printf("primes below 20000: %u\n", primes);
    return 0;
}
