/* sort: qsort and a hand-written stable merge sort over LCG data, cross-checked; plus
 * qsort of strings. Usage: sort [COUNT]. Exit code 0 when every self-check passes. */
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

static uint64_t rng_state = 12345;
static uint32_t next_u32(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 32);
}

typedef struct {
    int32_t key;
    uint32_t index;
} item;

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Top-down merge sort on items by key; stable (ties keep index order). */
static void merge_sort(item *a, item *tmp, size_t n) {
    if (n < 2)
        return;
    size_t mid = n / 2;
    merge_sort(a, tmp, mid);
    merge_sort(a + mid, tmp, n - mid);
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < n)
        tmp[k++] = a[j].key < a[i].key ? a[j++] : a[i++];
    while (i < mid)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

static void insertion_sort(int32_t *a, size_t n) {
    for (size_t i = 1; i < n; i++) {
        int32_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 0) : 2000;
    if (n == 0)
        n = 1;
    int32_t *q = malloc(n * sizeof *q);
    item *m = malloc(n * sizeof *m), *tmp = malloc(n * sizeof *tmp);
    if (!q || !m || !tmp) {
        printf("out of memory\n");
        return 2;
    }
    /* Values with many duplicates (range n/2) and both signs. */
    uint32_t range = (uint32_t)(n / 2 + 1);
    for (size_t i = 0; i < n; i++) {
        int32_t v = (int32_t)(next_u32() % range) - (int32_t)(range / 2);
        q[i] = v;
        m[i].key = v;
        m[i].index = (uint32_t)i;
    }
    qsort(q, n, sizeof *q, cmp_i32);
    merge_sort(m, tmp, n);
    uint64_t sum = 0;
    int sorted = 1, stable = 1, equal = 1;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && q[i - 1] > q[i])
            sorted = 0;
        if (i > 0 && m[i - 1].key == m[i].key && m[i - 1].index > m[i].index)
            stable = 0;
        if (q[i] != m[i].key)
            equal = 0;
        sum = sum * 31 + (uint32_t)q[i] + m[i].index;
    }
    CHECK(sorted);
    CHECK(stable);
    CHECK(equal);
    printf("n=%zu min=%d max=%d median=%d checksum=%016" PRIx64 "\n", n, q[0], q[n - 1],
           q[n / 2], sum);

    /* Insertion sort of a small prefix copy must agree with qsort of the same prefix. */
    size_t small = n < 300 ? n : 300;
    int32_t *a = malloc(small * sizeof *a), *b = malloc(small * sizeof *b);
    for (size_t i = 0; i < small; i++)
        a[i] = b[i] = (int32_t)next_u32();
    insertion_sort(a, small);
    qsort(b, small, sizeof *b, cmp_i32);
    CHECK(memcmp(a, b, small * sizeof *a) == 0);
    printf("small=%zu first=%d last=%d\n", small, a[0], a[small - 1]);

    /* Strings: random lowercase words, sorted with strcmp. */
    enum { WORDS = 400 };
    static char storage[WORDS][12];
    char *words[WORDS];
    for (int i = 0; i < WORDS; i++) {
        int len = 1 + next_u32() % 10;
        for (int k = 0; k < len; k++)
            storage[i][k] = (char)('a' + next_u32() % 26);
        storage[i][len] = 0;
        words[i] = storage[i];
    }
    qsort(words, WORDS, sizeof words[0], cmp_str);
    int ordered = 1;
    for (int i = 1; i < WORDS; i++)
        ordered &= strcmp(words[i - 1], words[i]) <= 0;
    CHECK(ordered);
    printf("words first=%s second=%s last=%s\n", words[0], words[1], words[WORDS - 1]);

    free(a);
    free(b);
    free(q);
    free(m);
    free(tmp);
    printf("sort %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
