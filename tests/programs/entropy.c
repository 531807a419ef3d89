/* entropy: reads getrandom(2) and the AT_RANDOM auxv bytes. stdout shows only what must
 * match a native run (sizes, success); the random bytes go to stderr, so runs with the same
 * seed can be compared byte for byte and runs with different seeds can be told apart.
 * Exit code 0 on success, 1 when getrandom or AT_RANDOM is unavailable. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

static void hex(const char *what, const unsigned char *p, size_t n) {
    fprintf(stderr, "%s=", what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%02x", p[i]);
    fprintf(stderr, "\n");
}

int main(void) {
    unsigned char buf[32];
    memset(buf, 0, sizeof buf);
    long got = syscall(SYS_getrandom, buf, sizeof buf, 0);
    int ok = 1;
    if (got == (long)sizeof buf) {
        printf("getrandom: %ld bytes\n", got);
        hex("getrandom", buf, sizeof buf);
    } else {
        printf("getrandom: failed (%ld, errno %d)\n", got, errno);
        ok = 0;
    }
    const unsigned char *at = (const unsigned char *)getauxval(AT_RANDOM);
    if (at) {
        printf("AT_RANDOM: present\n");
        hex("AT_RANDOM", at, 16);
    } else {
        printf("AT_RANDOM: missing\n");
        ok = 0;
    }
    return ok ? 0 : 1;
}
