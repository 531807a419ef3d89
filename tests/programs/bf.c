/* bf: a brainf*ck interpreter (bracket table, 30000-cell tape) running fixed programs:
 * hello world, the digits, and a generated nested-loop workload whose outer count is the
 * argument. Usage: bf [REPS]. Exit code 0 when the self-checks pass, 1 otherwise. */
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

enum { TAPE = 30000 };

typedef struct {
    unsigned char tape[TAPE];
    char out[256];
    size_t out_len;
    uint64_t ops;
} machine;

/* Runs code; returns 0 on success, -1 on unbalanced brackets or a tape overrun. */
static int run(machine *m, const char *code) {
    size_t n = strlen(code);
    size_t *jump = malloc((n + 1) * sizeof *jump);
    size_t *stack = malloc((n + 1) * sizeof *stack);
    size_t sp = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (code[i] == '[') {
            stack[sp++] = i;
        } else if (code[i] == ']') {
            if (sp == 0) {
                rc = -1;
                goto out;
            }
            size_t open = stack[--sp];
            jump[open] = i;
            jump[i] = open;
        }
    }
    if (sp != 0) {
        rc = -1;
        goto out;
    }
    memset(m->tape, 0, sizeof m->tape);
    m->out_len = 0;
    m->ops = 0;
    size_t ptr = 0;
    for (size_t pc = 0; pc < n; pc++) {
        m->ops++;
        switch (code[pc]) {
        case '+': m->tape[ptr]++; break;
        case '-': m->tape[ptr]--; break;
        case '>':
            if (++ptr == TAPE) {
                rc = -1;
                goto out;
            }
            break;
        case '<':
            if (ptr-- == 0) {
                rc = -1;
                goto out;
            }
            break;
        case '.':
            if (m->out_len < sizeof m->out - 1)
                m->out[m->out_len++] = (char)m->tape[ptr];
            break;
        case '[':
            if (m->tape[ptr] == 0)
                pc = jump[pc];
            break;
        case ']':
            if (m->tape[ptr] != 0)
                pc = jump[pc];
            break;
        default: m->ops--; break; /* comment character */
        }
    }
    m->out[m->out_len] = 0;
out:
    free(jump);
    free(stack);
    return rc;
}

static uint64_t tape_hash(const machine *m) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < 64; i++)
        h = (h ^ m->tape[i]) * 0x100000001b3ULL;
    return h;
}

static void append(char **p, char c, int count) {
    for (int i = 0; i < count; i++)
        *(*p)++ = c;
}

int main(int argc, char **argv) {
    static machine m;
    int reps = argc > 1 ? atoi(argv[1]) : 2;
    if (reps < 0)
        reps = 0;

    const char *hello = "++++++++[>++++[>++>+++>+++>+<<<<-]>+>+>->>+[<]<-]>>.>---.+++++++..+++.>>."
                        "<-.<.+++.------.--------.>>+.>++.";
    CHECK(run(&m, hello) == 0);
    printf("hello: %s", m.out);
    printf("hello ops=%" PRIu64 "\n", m.ops);
    CHECK(strcmp(m.out, "Hello World!\n") == 0);

    const char *digits = "digits: ++++++++[>++++++<-]>>++++++++++[<.+>-]++++++++++.";
    CHECK(run(&m, digits) == 0);
    printf("digits: %s", m.out);
    CHECK(strcmp(m.out, "0123456789\n") == 0);

    CHECK(run(&m, "[[]") == -1 && run(&m, "]") == -1 && run(&m, "<") == -1);

    /* cell0 = reps; each outer pass sets cell1 = 100 and, 100 times, adds 100 to cell2 and
     * drains it into cell3 -- so cell3 ends at reps * 100 * 100 mod 256. */
    size_t cap = (size_t)reps + 512;
    char *work = malloc(cap), *p = work;
    append(&p, '+', reps % 256);
    p += sprintf(p, "[>");
    append(&p, '+', 100);
    p += sprintf(p, "[>");
    append(&p, '+', 100);
    p += sprintf(p, "[->+<]<-]<-]>>>.");
    *p = 0;
    CHECK(run(&m, work) == 0);
    unsigned expect = (unsigned)((reps % 256) * 100 * 100) % 256;
    printf("work reps=%d ops=%" PRIu64 " cell3=%u tape=%016" PRIx64 "\n", reps % 256, m.ops,
           m.tape[3], tape_hash(&m));
    CHECK(m.tape[3] == expect && m.out_len == 1 && (unsigned char)m.out[0] == expect);
    free(work);
    printf("bf %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
