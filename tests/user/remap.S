# Translations dropped when mappings change, each after the old one was used:
# - mmap MAP_FIXED over a page holding "X": the new page reads as zero;
# - mprotect of a written page to read-only: it still reads "ok";
# - munmap of 100 pages (more than the range flush takes one by one), the last one written
#   before: a store to it is a SIGSEGV.
# Prints "0ok\n", then faults.
    .globl _start
    .text
_start:
    # A page holding 'X', read back (cached translation).
    mov $9, %eax
    xor %edi, %edi
    mov $4096, %esi
    mov $3, %edx
    mov $0x22, %r10d
    mov $-1, %r8
    xor %r9d, %r9d
    syscall
    mov %rax, %rbx
    movb $'X', (%rbx)
    movzbl (%rbx), %ecx
    # MAP_FIXED over it: a fresh zero page.
    mov $9, %eax
    mov %rbx, %rdi
    mov $4096, %esi
    mov $3, %edx
    mov $0x32, %r10d
    mov $-1, %r8
    xor %r9d, %r9d
    syscall
    movzbl (%rbx), %ecx
    add $'0', %ecx
    mov %cl, (%rbx)
    movl $0x0a6b6f, 1(%rbx)
    # Read-only now: reads still work.
    mov $10, %eax
    mov %rbx, %rdi
    mov $4096, %esi
    mov $1, %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov %rbx, %rsi
    mov $4, %edx
    syscall
    # 100 pages, the last written, then all unmapped.
    mov $9, %eax
    xor %edi, %edi
    mov $409600, %esi
    mov $3, %edx
    mov $0x22, %r10d
    mov $-1, %r8
    xor %r9d, %r9d
    syscall
    mov %rax, %rbx
    movl $1, 409596(%rbx)
    mov $11, %eax
    mov %rbx, %rdi
    mov $409600, %esi
    syscall
    movl $2, 409596(%rbx)
    ud2
