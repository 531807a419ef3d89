# Static-PIE: load the message RIP-relatively (no relocations needed), copy it to the stack
# and write it; exit(7).
    .globl _start
    .text
_start:
    mov msg(%rip), %rax
    mov %rax, (%rsp)
    mov $1, %eax
    mov $1, %edi
    mov %rsp, %rsi
    mov $6, %edx
    syscall
    mov $60, %eax
    mov $7, %edi
    syscall
    ud2

    .section .rodata
msg:
    .ascii "hello\n\0\0"
