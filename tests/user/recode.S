# Code in a mapping that is unmapped whole and mapped again with other code, after the
# first code ran hot (long enough for the JIT to compile and chain it):
# - mmap 100 pages read-write-execute, write every one, put `mov $1, %eax; ret` in page 50
#   and call it 5000 times (from the text page: calls into another page);
# - munmap the 100 pages (more populated pages than are dropped one by one: the range's
#   translations go), mmap them again at the same address, write every one, put
#   `mov $2, %eax; ret` in page 50 and call it 5000 times.
# The sum of the results must be 15000: prints "ok\n" and exits 0, else "bad\n" and exits 1.

    .equ PAGES, 100
    .equ LEN, PAGES * 4096
    .equ CODE, 50 * 4096
    .equ CALLS, 5000

# mmap(addr, LEN, PROT_READ|PROT_WRITE|PROT_EXEC, flags, -1, 0) -> RAX
.macro mmap_rwx addr, flags
    mov $9, %eax
    mov \addr, %rdi
    mov $LEN, %esi
    mov $7, %edx
    mov \flags, %r10d
    mov $-1, %r8
    xor %r9d, %r9d
    syscall
.endm

# Write every page of the mapping at %rbx, then `mov $imm, %eax; ret` at CODE.
.macro fill imm
    xor %ecx, %ecx
1:  movl $1, 4092(%rbx,%rcx)
    add $4096, %ecx
    cmp $LEN, %ecx
    jne 1b
    movb $0xb8, CODE(%rbx)
    movl $\imm, CODE+1(%rbx)
    movb $0xc3, CODE+5(%rbx)
.endm

# Call the code at CODE CALLS times, adding each result to %r12.
.macro calls
    mov $CALLS, %r13d
    lea CODE(%rbx), %r14
2:  call *%r14
    add %rax, %r12
    dec %r13d
    jne 2b
.endm

    .globl _start
    .text
_start:
    xor %r12d, %r12d
    mmap_rwx $0, $0x22
    mov %rax, %rbx
    fill 1
    calls
    mov $11, %eax
    mov %rbx, %rdi
    mov $LEN, %esi
    syscall
    mmap_rwx %rbx, $0x32
    cmp %rax, %rbx
    jne bad
    fill 2
    calls
    cmp $3 * CALLS, %r12
    jne bad
    lea ok(%rip), %rsi
    mov $3, %edx
    xor %edi, %edi
    jmp out
bad:
    lea nok(%rip), %rsi
    mov $4, %edx
    mov $1, %edi
out:
    mov %edi, %r15d
    mov $1, %eax
    mov $1, %edi
    syscall
    mov $60, %eax
    mov %r15d, %edi
    syscall

    .section .rodata
ok: .ascii "ok\n"
nok: .ascii "bad\n"
