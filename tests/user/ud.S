# An undefined instruction: SIGILL.
    .globl _start
    .text
_start:
    nop
    ud2
