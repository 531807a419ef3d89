/* A normal C program (libc, printf): enabled at integration once the interpreter has the
   instructions libc needs. */
#include <stdio.h>
int main(int argc, char **argv) {
    printf("hello, %s\n", argc > 1 ? argv[1] : "world");
    return 3;
}
