# Grow the break by three pages, store to the second (its translation is now cached), shrink
# the break back, then store to that page again: SIGSEGV (the shrink dropped the translation).
    .globl _start
    .text
_start:
    mov $12, %eax
    xor %edi, %edi
    syscall
    mov %rax, %rbx
    lea 0x3000(%rbx), %rdi
    mov $12, %eax
    syscall
    movl $0x0a6b6f, 0x1000(%rbx)
    mov $1, %eax
    mov $1, %edi
    lea 0x1000(%rbx), %rsi
    mov $3, %edx
    syscall
    mov $12, %eax
    mov %rbx, %rdi
    syscall
    movl $1, 0x1000(%rbx)
    ud2
