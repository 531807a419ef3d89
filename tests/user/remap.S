# Translations dropped when mappings change, each after the old one was used:
# - mmap MAP_FIXED over a page holding "X": the new page reads as zero;
# - mprotect of a written page to read-only: it still reads "ok";
# - munmap of 100 pages, every one written before (more stale pages than are dropped one by
#   one: the whole TLB goes): a store to the last one is a SIGSEGV.
# Prints "0ok\n", then faults.

# mmap(addr, len, PROT_READ|PROT_WRITE, flags, -1, 0) -> RAX
.macro mmap_rw addr, len, flags
    mov $9, %eax
    mov \addr, %rdi
    mov \len, %esi
    mov $3, %edx
    mov \flags, %r10d
    mov $-1, %r8
    xor %r9d, %r9d
    syscall
.endm

    .globl _start
    .text
_start:
    # A page holding 'X', read back (cached translation).
    mmap_rw $0, $4096, $0x22
    mov %rax, %rbx
    movb $'X', (%rbx)
    movzbl (%rbx), %ecx
    # MAP_FIXED over it: a fresh zero page.
    mmap_rw %rbx, $4096, $0x32
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
    # 100 pages, each written, then all unmapped.
    mmap_rw $0, $409600, $0x22
    mov %rax, %rbx
    xor %ecx, %ecx
1:  movl $1, 4092(%rbx,%rcx)
    add $4096, %ecx
    cmp $409600, %ecx
    jne 1b
    mov $11, %eax
    mov %rbx, %rdi
    mov $409600, %esi
    syscall
    movl $2, 409596(%rbx)
    ud2
