# Alternate writes to stdout and stderr: "a" "b" "c" "d" in that order.
    .globl _start
    .text
_start:
    mov $1, %eax
    mov $1, %edi
    mov $s, %esi
    mov $1, %edx
    syscall
    mov $1, %eax
    mov $2, %edi
    mov $s+1, %esi
    mov $1, %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov $s+2, %esi
    mov $1, %edx
    syscall
    mov $1, %eax
    mov $2, %edi
    mov $s+3, %esi
    mov $1, %edx
    syscall
    mov $60, %eax
    mov $0, %edi
    syscall
    .section .rodata
s:  .ascii "abcd"
