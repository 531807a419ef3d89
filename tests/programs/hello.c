/* hello: the smallest smoke test -- stdio, argc, a normal return from main. */
#include <stdio.h>

int main(int argc, char **argv) {
    (void)argv;
    printf("hello, world\n");
    printf("argc=%d\n", argc);
    return 0;
}
