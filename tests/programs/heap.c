/* heap: malloc/calloc/realloc/free traffic -- a chained hash table of strings, a growing
 * array, a linked list, and large blocks (mmap-sized). Usage: heap [KEYS]. Exit code 0
 * when the self-checks pass, 1 otherwise. */
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

typedef struct entry {
    struct entry *next;
    uint64_t value;
    char key[];
} entry;

typedef struct {
    entry **buckets;
    size_t nbuckets, count;
} table;

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static void table_grow(table *t) {
    size_t nb = t->nbuckets ? t->nbuckets * 2 : 8;
    entry **b = calloc(nb, sizeof *b);
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (entry *e = t->buckets[i], *next; e; e = next) {
            next = e->next;
            size_t k = hash_str(e->key) & (nb - 1);
            e->next = b[k];
            b[k] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
}

static entry **table_find(table *t, const char *key) {
    if (t->nbuckets == 0)
        return NULL;
    entry **pp = &t->buckets[hash_str(key) & (t->nbuckets - 1)];
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void table_put(table *t, const char *key, uint64_t value) {
    entry **pp = table_find(t, key);
    if (pp && *pp) {
        (*pp)->value = value;
        return;
    }
    if (t->count + 1 > t->nbuckets * 3 / 4)
        table_grow(t);
    size_t len = strlen(key);
    entry *e = malloc(sizeof *e + len + 1);
    memcpy(e->key, key, len + 1);
    e->value = value;
    size_t k = hash_str(key) & (t->nbuckets - 1);
    e->next = t->buckets[k];
    t->buckets[k] = e;
    t->count++;
}

static int table_del(table *t, const char *key) {
    entry **pp = table_find(t, key);
    if (!pp || !*pp)
        return 0;
    entry *e = *pp;
    *pp = e->next;
    free(e);
    t->count--;
    return 1;
}

typedef struct node {
    struct node *next;
    int value;
} node;

int main(int argc, char **argv) {
    int keys = argc > 1 ? atoi(argv[1]) : 1000;
    if (keys < 1)
        keys = 1;
    char (*names)[32] = malloc((size_t)keys * sizeof *names);
    for (int i = 0; i < keys; i++)
        snprintf(names[i], sizeof names[i], "key-%d-%x", i, i * 2654435761u);
    table t = {0};
    for (int i = 0; i < keys; i++)
        table_put(&t, names[i], (uint64_t)i * i);
    int deleted = 0;
    for (int i = 0; i < keys; i += 2)
        deleted += table_del(&t, names[i]);
    uint64_t sum = 0;
    int found = 0;
    for (int i = 0; i < keys; i++) {
        entry **pp = table_find(&t, names[i]);
        if (pp && *pp) {
            found++;
            sum += (*pp)->value;
        }
    }
    size_t longest = 0;
    for (size_t i = 0; i < t.nbuckets; i++) {
        size_t len = 0;
        for (entry *e = t.buckets[i]; e; e = e->next)
            len++;
        if (len > longest)
            longest = len;
    }
    printf("table keys=%d deleted=%d found=%d count=%zu buckets=%zu longest=%zu sum=%" PRIu64
           "\n",
           keys, deleted, found, t.count, t.nbuckets, longest, sum);
    CHECK(found == keys / 2 && t.count == (size_t)found && deleted == (keys + 1) / 2);
    for (size_t i = 0; i < t.nbuckets; i++)
        for (entry *e = t.buckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(t.buckets);
    free(names);

    /* Growing array: realloc one element at a time (exercises in-place growth and moves). */
    int *arr = NULL;
    size_t n = 0;
    uint64_t asum = 0;
    for (int i = 0; i < 8000; i++) {
        arr = realloc(arr, (n + 1) * sizeof *arr);
        arr[n++] = i ^ 0x5a5a;
    }
    for (size_t i = 0; i < n; i++)
        asum += (uint64_t)arr[i] * (i + 1);
    arr = realloc(arr, 10 * sizeof *arr); /* shrink keeps the prefix */
    CHECK(arr[9] == (9 ^ 0x5a5a));
    free(arr);
    printf("realloc array n=%zu weighted sum=%" PRIu64 "\n", n, asum);

    /* Linked list: build, reverse, walk. */
    node *head = NULL;
    for (int i = 0; i < 5000; i++) {
        node *nd = malloc(sizeof *nd);
        nd->value = i;
        nd->next = head;
        head = nd;
    }
    node *rev = NULL;
    while (head) {
        node *next = head->next;
        head->next = rev;
        rev = head;
        head = next;
    }
    int in_order = 1, expect = 0;
    while (rev) {
        node *next = rev->next;
        in_order &= rev->value == expect++;
        free(rev);
        rev = next;
    }
    CHECK(in_order && expect == 5000);
    printf("list reversed in order: %s\n", in_order ? "yes" : "no");

    /* Large blocks go to mmap in both glibc and musl; calloc must return zeroed memory. */
    size_t big = 1u << 20;
    unsigned char *blk = calloc(big, 1);
    size_t nonzero = 0;
    for (size_t i = 0; i < big; i += 4096)
        nonzero += blk[i] != 0;
    memset(blk, 0xab, big);
    unsigned char *blk2 = realloc(blk, big * 2);
    CHECK(blk2 && blk2[big - 1] == 0xab && blk2[0] == 0xab);
    free(blk2);
    CHECK(nonzero == 0);
    void *ptrs[64];
    for (int i = 0; i < 64; i++)
        ptrs[i] = malloc((size_t)(i + 1) * 1000);
    for (int i = 0; i < 64; i += 2)
        free(ptrs[i]);
    for (int i = 1; i < 64; i += 2)
        free(ptrs[i]);
    printf("large blocks ok: %s\n", nonzero == 0 ? "yes" : "no");
    printf("heap %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
