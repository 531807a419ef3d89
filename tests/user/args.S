# Print argc (8 raw bytes), argv[1] (6 bytes), argv[2] (5 bytes) and envp[0] (18 bytes),
# reading the initial stack directly; the test runs it with exactly two arguments.
    .globl _start
    .text
_start:
    mov $1, %eax
    mov $1, %edi
    mov %rsp, %rsi
    mov $8, %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov 16(%rsp), %rsi
    mov $6, %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov 24(%rsp), %rsi
    mov $5, %edx
    syscall
    mov $1, %eax
    mov $1, %edi
    mov 40(%rsp), %rsi
    mov $18, %edx
    syscall
    mov $231, %eax
    mov $0, %edi
    syscall
