# Print a line, then load from address 0: SIGSEGV after the line is out.
    .globl _start
    .text
_start:
    mov $1, %eax
    mov $1, %edi
    mov $msg, %esi
    mov $7, %edx
    syscall
    mov $0, %eax
    mov (%rax), %rbx
    ud2
    .section .rodata
msg:
    .ascii "before\n"
