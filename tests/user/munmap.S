# mmap a page, store and print "ok\n" from it, munmap it, then store again: SIGSEGV.
    .globl _start
    .text
_start:
    mov $9, %eax
    mov $0, %edi
    mov $4096, %esi
    mov $3, %edx
    mov $0x22, %r10d
    mov $-1, %r8
    mov $0, %r9d
    syscall
    mov %rax, %rbx
    movl $0x0a6b6f, (%rbx)
    mov $1, %eax
    mov $1, %edi
    mov %rbx, %rsi
    mov $3, %edx
    syscall
    mov $11, %eax
    mov %rbx, %rdi
    mov $4096, %esi
    syscall
    movl $1, (%rbx)
    ud2
