; triple.asm - issue 5 area 4: triple fault.
; Loads an IDT with limit 0 and divides by zero: #DE cannot be delivered (#GP), the #GP
; cannot be delivered (#DF), the #DF cannot be delivered: triple fault -> shutdown.
; Under QEMU -no-reboot the run ends with exit status 0 after the lines printed before;
; Lockstep must stop with a shutdown. Nothing after the DIV may run.
%include "lib.inc"

start:
        mov esp, stack_top
        lgdt [gdt_desc]
        jmp 0x08:pm32
pm32:
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        mov ss, ax
        PUTS32 "triple: protected mode, loading a zero-limit IDT"
        lidt [idt_desc]
        PUTS32 "triple: dividing by zero"
        xor ecx, ecx
        mov eax, 1
        xor edx, edx
        div ecx
        PUTS32 "FAIL: execution continued after the triple fault"
        EXIT32 1

        align 8
gdt:    dq 0
        dq 0x00cf9a000000ffff           ; 0x08 32-bit code
        dq 0x00cf92000000ffff           ; 0x10 32-bit data
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
idt_desc:
        dw 0                            ; limit 0: no gate fits
        dd 0
        align 16
        times 1024 db 0
stack_top:
%include "tail.inc"
