# Loop forever (for --max-insns).
    .globl _start
    .text
_start:
    jmp _start
