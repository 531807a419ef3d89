; echo.asm - issue 6: console input through COM1.
; Reads 8 bytes by polling LSR.DR (RX interrupt off) and echoes them upper-cased, then
; programs the 8259 (IRQ4 -> vector 0x24) and IER.ERBFI and reads 16 more bytes in the RX
; interrupt handler (halting in between), echoing them reversed. The output depends only on
; the bytes, not on when they arrive, so it can be compared with QEMU fed the same bytes.
; The test feeds "abcdefgh" then "0123456789ABCDEF" (24 bytes: more than the FIFO holds).
%include "lib.inc"

COM1        equ 0x3f8
N_POLL      equ 8
N_IRQ       equ 16

start:
        mov esp, stack_top
        lgdt [gdt_desc]
        jmp 0x08:pm32
pm32:
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        mov ss, ax
        ; UART: 115200 8N1, FIFO on (cleared, trigger 8), DTR | RTS | OUT2, no interrupts.
        mov dx, COM1 + 1
        xor al, al
        out dx, al
        mov dx, COM1 + 3
        mov al, 0x80
        out dx, al
        mov dx, COM1
        mov al, 1
        out dx, al
        mov dx, COM1 + 1
        xor al, al
        out dx, al
        mov dx, COM1 + 3
        mov al, 0x03
        out dx, al
        mov dx, COM1 + 2
        mov al, 0x87
        out dx, al
        mov dx, COM1 + 4
        mov al, 0x0b
        out dx, al
        mov dx, COM1 + 2
        in al, dx
        and al, 0xc0
        cmp al, 0xc0
        CHECK32 e, "IIR reports the FIFO enabled"
        PUTS32 "echo: ready"

        ; Polling: wait for LSR.DR, read RBR, echo upper-cased.
        mov ecx, N_POLL
.poll:  mov dx, COM1 + 5
.wait:  in al, dx
        test al, 1
        jz .wait
        mov dx, COM1
        in al, dx
        cmp al, 'a'
        jb .put
        cmp al, 'z'
        ja .put
        sub al, 0x20
.put:   out dx, al
        loop .poll
        mov al, 10
        out dx, al

        ; 8259 pair: vectors 0x20/0x28, only IRQ4 unmasked.
        mov al, 0x11
        out 0x20, al
        out 0xa0, al
        mov al, 0x20
        out 0x21, al
        mov al, 0x28
        out 0xa1, al
        mov al, 4
        out 0x21, al
        mov al, 2
        out 0xa1, al
        mov al, 1
        out 0x21, al
        out 0xa1, al
        mov al, 0xef
        out 0x21, al
        mov al, 0xff
        out 0xa1, al
        mov eax, isr_com1
        lea edi, [idt + 0x24 * 8]
        mov [edi], ax
        mov word [edi + 2], 0x08
        mov word [edi + 4], 0x8e00
        shr eax, 16
        mov [edi + 6], ax
        lidt [idt_desc]
        ; RX data interrupt on; wait for the bytes with STI; HLT.
        mov dx, COM1 + 1
        mov al, 1
        out dx, al
.idle:  cli
        cmp dword [count], N_IRQ
        jae .got
        sti
        hlt
        jmp .idle
.got:   mov dx, COM1 + 1
        xor al, al
        out dx, al
        cmp dword [bad_iir], 0
        CHECK32 e, "RX interrupts identified as data available or character timeout"
        ; Echo reversed.
        mov ecx, N_IRQ
        mov dx, COM1
.rev:   mov al, [buf + ecx - 1]
        out dx, al
        loop .rev
        mov al, 10
        out dx, al
        mov dx, COM1 + 5
        in al, dx
        test al, 0x03
        CHECK32 z, "no data left and no overrun"
        PUTS32 "PASS"
        EXIT32 0

isr_com1:
        push eax
        push edx
        mov dx, COM1 + 2
        in al, dx
        and al, 0x0f
        cmp al, 0x04
        je .rx
        cmp al, 0x0c
        je .rx
        ; "No interrupt pending" is legitimate: a byte that arrived while this handler ran
        ; re-raised the (edge-triggered) request, and the loop below already read it.
        cmp al, 0x01
        je .rx
        inc dword [bad_iir]
.rx:    mov dx, COM1 + 5
        in al, dx
        test al, 1
        jz .done
        mov dx, COM1
        in al, dx
        mov edx, [count]
        cmp edx, N_IRQ
        jae .drop
        mov [buf + edx], al
        inc dword [count]
.drop:  jmp .rx
.done:  mov al, 0x20
        out 0x20, al
        pop edx
        pop eax
        iret

        align 8
gdt:    dq 0
        dq 0x00cf9a000000ffff               ; 0x08 ring-0 code
        dq 0x00cf92000000ffff               ; 0x10 ring-0 data
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
        align 8
idt:    times 256 dq 0
idt_desc:
        dw 256 * 8 - 1
        dd idt
count:  dd 0
bad_iir: dd 0
buf:    times N_IRQ db 0
        align 16
        times 1024 db 0
stack_top:

%include "tail.inc"
