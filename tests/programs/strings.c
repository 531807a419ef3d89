/* strings: argc/argv, the <string.h> workhorses across sizes and alignments (checked
 * against naive byte loops), snprintf of integers, strtol, reversal and tokenising.
 * Usage: strings [ARGS...]. Exit code: argc (so arguments are visible in the code). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Truncation below is deliberate: it is what is being tested. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#pragma GCC diagnostic ignored "-Wstringop-truncation"

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: %s\n", __LINE__, #cond);                                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static uint64_t h64(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

static int sign(int v) { return (v > 0) - (v < 0); }

static size_t naive_strlen(const char *s) {
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

/* Buffers padded on both sides so out-of-bounds writes are detected. */
static unsigned char src[400], dst[400], ref[400];

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 7 + (i >> 3));
}

static void memory_functions(void) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t off = 0; off < 16; off += 3) {
        for (size_t len = 0; len <= 260; len += (len < 40 ? 1 : 37)) {
            /* memcpy */
            fill(src, sizeof src, (unsigned)(off + len));
            memset(dst, 0xee, sizeof dst);
            memset(ref, 0xee, sizeof ref);
            memcpy(dst + 32 + off, src + 16 + (len & 7), len);
            for (size_t i = 0; i < len; i++)
                ref[32 + off + i] = src[16 + (len & 7) + i];
            CHECK(memcmp(dst, ref, sizeof dst) == 0);
            /* memset */
            memset(dst + 8 + off, (int)(len & 0xff), len);
            for (size_t i = 0; i < len; i++)
                ref[8 + off + i] = (unsigned char)len;
            CHECK(memcmp(dst, ref, sizeof dst) == 0);
            /* memmove forwards and backwards overlapping */
            memmove(dst + 40 + off, dst + 40, len);
            for (size_t i = len; i-- > 0;)
                ref[40 + off + i] = ref[40 + i];
            CHECK(memcmp(dst, ref, sizeof dst) == 0);
            memmove(dst + 40, dst + 40 + off, len);
            for (size_t i = 0; i < len; i++)
                ref[40 + i] = ref[40 + off + i];
            CHECK(memcmp(dst, ref, sizeof dst) == 0);
            /* strlen / memchr / strchr on a NUL-terminated run of non-zero bytes */
            for (size_t i = 0; i < len; i++)
                dst[100 + off + i] = (unsigned char)('a' + (i % 26));
            dst[100 + off + len] = 0;
            const char *s = (const char *)dst + 100 + off;
            CHECK(strlen(s) == naive_strlen(s));
            CHECK(strlen(s) == len);
            const char *c = strchr(s, 'z');
            CHECK(c == (len > 25 ? s + 25 : NULL));
            CHECK(strchr(s, 0) == s + len);
            CHECK(memchr(s, 'c', len) == (len > 2 ? s + 2 : NULL));
            const char *r = strrchr(s, 'a');
            CHECK(r == (len ? s + ((len - 1) / 26) * 26 : NULL));
            h = h64(h, memcmp(dst, src, len) < 0);
            h = h64(h, (uint64_t)strlen(s));
        }
    }
    printf("memory functions checksum=%016" PRIx64 "\n", h);
}

static void comparisons(void) {
    static const char *pairs[][2] = {
        {"", ""}, {"a", ""}, {"", "a"}, {"abc", "abd"}, {"abd", "abc"}, {"abc", "abc"},
        {"abc", "abcd"}, {"\x80", "\x7f"}, {"hello world", "hello"}, {"Zebra", "apple"},
    };
    printf("strcmp:");
    for (unsigned i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        int r = sign(strcmp(pairs[i][0], pairs[i][1]));
        int rn = sign(strncmp(pairs[i][0], pairs[i][1], 3));
        printf(" %d/%d", r, rn);
    }
    printf("\n");
    CHECK(sign(strcmp("\x80", "\x7f")) == 1); /* compared as unsigned char */
    const char *hay = "the quick brown fox jumps over the lazy dog";
    CHECK(strstr(hay, "fox") == hay + 16);
    CHECK(strstr(hay, "the lazy") == hay + 31);
    CHECK(strstr(hay, "cat") == NULL);
    CHECK(strstr(hay, "") == hay);
    printf("strstr: fox@%d dog@%d\n", (int)(strstr(hay, "fox") - hay),
           (int)(strstr(hay, "dog") - hay));
    printf("strspn=%zu strcspn=%zu\n", strspn(hay, "eht "), strcspn(hay, "xyz"));
}

static void formatting(void) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "[%d|%i|%u|%ld|%lld|%lu|%llu]", INT_MIN, INT_MAX, UINT_MAX,
                     LONG_MIN, LLONG_MAX, ULONG_MAX, 0ULL);
    printf("%s (%d)\n", buf, n);
    CHECK(n == (int)strlen(buf));
    n = snprintf(buf, sizeof buf, "[%x|%X|%#x|%o|%#o|%lx|%016llx]", 0xdeadbeefu, 0xcafeu, 255u,
                 8u, 8u, 0x123456789abcdefUL, 0xfULL);
    printf("%s (%d)\n", buf, n);
    n = snprintf(buf, sizeof buf, "[%5d|%-5d|%05d|%+d|% d|%.3d|%8.4d|%c%c|%s|%.2s|%%]", 42, 42,
                 -42, 7, 7, 5, -12, 'o', 'k', "str", "truncate");
    printf("%s (%d)\n", buf, n);
    n = snprintf(buf, sizeof buf, "[%hhd|%hd|%hhu|%zd|%zu|%" PRId64 "|%" PRIu64 "]",
                 (signed char)-1, (short)-32768, (unsigned char)255, (ssize_t)-3, (size_t)3,
                 INT64_MIN, UINT64_MAX);
    printf("%s (%d)\n", buf, n);
    char tiny[6];
    n = snprintf(tiny, sizeof tiny, "%d", 1234567890);
    CHECK(n == 10 && strcmp(tiny, "12345") == 0);
    printf("truncated=\"%s\" wanted=%d\n", tiny, n);
    n = snprintf(NULL, 0, "%ld", -1000000000000L);
    CHECK(n == 14);
}

static void conversions(void) {
    char *end;
    errno = 0;
    long a = strtol("  -0x1fz", &end, 0);
    CHECK(a == -31 && *end == 'z');
    unsigned long b = strtoul("777", NULL, 8);
    CHECK(b == 511);
    long long c = strtoll("99999999999999999999", NULL, 10);
    CHECK(c == LLONG_MAX && errno == ERANGE);
    errno = 0;
    long d = strtol("zz", &end, 36);
    CHECK(d == 35 * 36 + 35 && errno == 0);
    CHECK(atoi("  +123abc") == 123);
    printf("strtol: %ld %lu %lld %ld %d\n", a, b, c, d, atoi("-2147483648"));
    int up = 0, dig = 0, sp = 0, pun = 0;
    for (int ch = 0; ch < 128; ch++) {
        up += isupper(ch) != 0;
        dig += isdigit(ch) != 0;
        sp += isspace(ch) != 0;
        pun += ispunct(ch) != 0;
    }
    printf("ctype: upper=%d digit=%d space=%d punct=%d toupper(q)=%c tolower(Q)=%c\n", up, dig,
           sp, pun, toupper('q'), tolower('Q'));
    CHECK(up == 26 && dig == 10 && sp == 6 && pun == 32);
}

static void reverse(char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n / 2; i++) {
        char t = s[i];
        s[i] = s[n - 1 - i];
        s[n - 1 - i] = t;
    }
}

static void tokenising(void) {
    char text[] = "  the quick,brown  fox;;jumps over,,the lazy dog ";
    char copy[sizeof text];
    memcpy(copy, text, sizeof text);
    char *save = NULL;
    int count = 0;
    printf("tokens:");
    for (char *t = strtok_r(text, " ,;", &save); t; t = strtok_r(NULL, " ,;", &save)) {
        printf(" <%s>", t);
        count++;
    }
    printf(" (%d)\n", count);
    /* Hand-written tokenizer must find the same tokens. */
    int count2 = 0;
    for (char *p = copy; *p;) {
        while (*p && strchr(" ,;", *p))
            p++;
        if (!*p)
            break;
        char *start = p;
        while (*p && !strchr(" ,;", *p))
            p++;
        count2 += p > start;
    }
    CHECK(count == 9 && count2 == count);
    char word[] = "lockstep determinism";
    reverse(word);
    printf("reversed: %s\n", word);
    CHECK(strcmp(word, "msinimreted petskcol") == 0);
    reverse(word);
    CHECK(strcmp(word, "lockstep determinism") == 0);
    char joined[128] = "";
    strcat(joined, "alpha");
    strncat(joined, "-beta-gamma", 5);
    strcpy(joined + strlen(joined), "!");
    printf("joined: %s\n", joined);
    CHECK(strcmp(joined, "alpha-beta!") == 0);
}

int main(int argc, char **argv) {
    printf("argc=%d\n", argc);
    for (int i = 1; i < argc; i++)
        printf("argv[%d]=\"%s\" len=%zu\n", i, argv[i], strlen(argv[i]));
    CHECK(argv[argc] == NULL);
    memory_functions();
    comparisons();
    formatting();
    conversions();
    tokenising();
    printf("strings %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 100 : argc;
}
