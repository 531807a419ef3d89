# write(1, "hello\n", 6); exit(7). Non-PIE: the message address is an absolute immediate.
    .globl _start
    .text
_start:
    mov $1, %eax
    mov $1, %edi
    mov $msg, %esi
    mov $6, %edx
    syscall
    mov $60, %eax
    mov $7, %edi
    syscall
    ud2

    .section .rodata
msg:
    .ascii "hello\n"
