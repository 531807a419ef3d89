# Issue a series of system calls and record each raw RAX (8 bytes) in `results`, then write
# `results` and 16 getrandom bytes to stdout and exit_group(300) (status 300 & 0xff = 44).
# Slots: 0 write(5,..)  1 write(1, 0x10, 5)  2 fork  3 getpid  4 clock_gettime(REALTIME)
#        5 tv_sec  6 tv_nsec  7 getrandom(16)  8 mmap  9 value read back from the mapping
#        10 brk(0)  11 brk(_end + 0x3000)  12 value read back from the heap  13 uname
    .globl _start
    .text
_start:
    mov $1, %eax
    mov $5, %edi
    mov $results, %esi
    mov $1, %edx
    syscall
    mov %rax, results+0

    mov $1, %eax
    mov $1, %edi
    mov $0x10, %esi
    mov $5, %edx
    syscall
    mov %rax, results+8

    mov $57, %eax
    syscall
    mov %rax, results+16

    mov $39, %eax
    syscall
    mov %rax, results+24

    mov $228, %eax
    mov $0, %edi
    mov $ts, %esi
    syscall
    mov %rax, results+32
    mov ts, %rax
    mov %rax, results+40
    mov ts+8, %rax
    mov %rax, results+48

    mov $318, %eax
    mov $rnd, %edi
    mov $16, %esi
    mov $0, %edx
    syscall
    mov %rax, results+56

    mov $9, %eax
    mov $0, %edi
    mov $4096, %esi
    mov $3, %edx
    mov $0x22, %r10d
    mov $-1, %r8
    mov $0, %r9d
    syscall
    mov %rax, results+64
    mov %rax, %rbx
    mov $0x1122334455667788, %rcx
    mov %rcx, 8(%rbx)
    mov 8(%rbx), %rdx
    mov %rdx, results+72

    mov $12, %eax
    mov $0, %edi
    syscall
    mov %rax, results+80
    mov $12, %eax
    mov $_end+0x3000, %rdi
    syscall
    mov %rax, results+88
    mov $0x0102030405060708, %rcx
    mov %rcx, _end+0x2000
    mov _end+0x2000, %rdx
    mov %rdx, results+96

    mov $63, %eax
    mov $uts, %edi
    syscall
    mov %rax, results+104

    mov $1, %eax
    mov $1, %edi
    mov $results, %esi
    mov $(14*8), %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov $rnd, %esi
    mov $16, %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov $uts, %esi
    mov $390, %edx
    syscall

    mov $231, %eax
    mov $300, %edi
    syscall
    ud2

    .bss
    .align 16
results: .skip 14*8
ts:      .skip 16
rnd:     .skip 16
uts:     .skip 390
