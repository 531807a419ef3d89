; modes.asm - issue 5 area 1: every mode and the transitions between them.
; 32-bit protected mode -> 16-bit protected mode -> real mode (segment arithmetic, 16-bit
; stack, LOOP, REP MOVSB with SI/DI) -> protected mode -> long mode (PAE, EFER.LME, CR0.PG)
; -> 64-bit code -> compatibility mode -> 64-bit -> compatibility -> paging off (leaves
; long mode) -> 32-bit protected mode.
%include "lib.inc"

REAL_BASE   equ 0x8000          ; where the real-mode blob is copied
RESULT      equ 0x7000          ; real-mode results (words)
PML4        equ 0x70000
PDPT        equ 0x71000
PD          equ 0x72000

start:
        mov esp, stack_top
        lgdt [gdt_desc]
        jmp 0x08:pm32
pm32:
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov fs, ax
        mov gs, ax
        PUTS32 "modes: 32-bit protected mode"
        ; 32-bit code with a 16-bit operand: wraps at 16 bits, upper half kept.
        mov eax, 0x1234ffff
        inc ax
        cmp eax, 0x12340000
        CHECK32 e, "16-bit INC in 32-bit code keeps bits 31:16"
        ; PUSH moves ESP by 4.
        mov ebx, esp
        push eax
        sub ebx, esp
        pop eax
        cmp ebx, 4
        CHECK32 e, "32-bit PUSH moves ESP by 4"

        ; ---- real mode round trip ----
        mov esi, real_blob
        mov edi, REAL_BASE
        mov ecx, real_blob_end - real_blob
        cld
        rep movsb
        mov [saved_esp], esp
        jmp 0x18:REAL_BASE              ; 16-bit protected-mode code segment, base 0
back32:
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov esp, [saved_esp]
        PUTS32 "modes: back from real mode"
        cmp word [RESULT], 0xbeef
        CHECK32 e, "real mode: segment:offset addressing (0x1234:0x10 = 0x12350)"
        cmp word [RESULT + 2], 2
        CHECK32 e, "real mode: PUSH moves SP by 2"
        cmp word [RESULT + 4], 10
        CHECK32 e, "real mode: LOOP counts CX"
        cmp dword [0x9000], 0x64636261
        CHECK32 e, "real mode: REP MOVSB with SI/DI"
        cmp word [RESULT + 6], 0
        CHECK32 e, "real mode: IP wraps, 16-bit jumps"

        ; ---- long mode ----
        mov edi, PML4
        xor eax, eax
        mov ecx, 3 * 4096 / 4
        rep stosd
        mov dword [PML4], PDPT | 3
        mov dword [PDPT], PD | 3
        mov edi, PD
        mov eax, 0x83
        mov ecx, 512
.pd:    mov [edi], eax
        mov dword [edi + 4], 0
        add eax, 0x200000
        add edi, 8
        loop .pd
        mov eax, cr4
        or eax, 1 << 5                  ; PAE
        mov cr4, eax
        mov eax, PML4
        mov cr3, eax
        mov ecx, 0xc0000080             ; EFER
        rdmsr
        or eax, 1 << 8                  ; LME
        wrmsr
        mov eax, cr0
        or eax, 1 << 31                 ; PG
        mov cr0, eax
        ; Now in compatibility mode (CS.L = 0) with EFER.LMA set.
        mov ecx, 0xc0000080
        rdmsr
        test eax, 1 << 10
        CHECK32 nz, "EFER.LMA set by CR0.PG with LME and PAE"
        jmp 0x28:lm64

        bits 64
lm64:
        PUTS64 "modes: 64-bit mode"
        mov rax, 0x123456789
        add rax, rax
        mov rbx, 0x2468acf12
        cmp rax, rbx
        CHECK64 e, "64-bit arithmetic"
        mov rbx, rsp
        push rax
        sub rbx, rsp
        pop rax
        cmp rbx, 8
        CHECK64 e, "64-bit PUSH moves RSP by 8"
        ; Into compatibility mode through an indirect far jump (m16:32).
        jmp dword far [rel compat_ptr]
compat_ptr:
        dd compat32
        dw 0x08

        bits 32
compat32:
        PUTS32 "modes: compatibility mode"
        mov eax, 0xffffffff
        add eax, 1
        CHECK32 c, "32-bit arithmetic in compatibility mode"
        ; Back to 64-bit mode with a direct far jump (valid outside 64-bit mode).
        jmp 0x28:lm64_again

        bits 64
lm64_again:
        mov rax, 1
        shl rax, 40
        test rax, rax
        CHECK64 nz, "back in 64-bit mode"
        jmp dword far [rel compat2_ptr]
compat2_ptr:
        dd leave_long
        dw 0x08

        bits 32
leave_long:
        mov eax, cr0
        and eax, ~(1 << 31)
        mov cr0, eax
        mov ecx, 0xc0000080
        rdmsr
        test eax, 1 << 10
        CHECK32 z, "clearing CR0.PG leaves long mode (LMA clear)"
        PUTS32 "modes: PASS"
        EXIT32 0

; ---- real-mode blob (runs at REAL_BASE) ----
        bits 16
real_blob:
        mov ax, 0x20                    ; 16-bit data segment, limit 0xffff
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov eax, cr0
        and eax, ~1
        mov cr0, eax
        jmp 0x0000:(REAL_BASE + .real - real_blob)
.real:
        xor ax, ax
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov sp, 0x7c00
        ; segment arithmetic: 0x1234:0x0010 is physical 0x12350, seen as 0x1235:0x0000.
        mov ax, 0x1234
        mov es, ax
        mov word [es:0x10], 0xbeef
        mov ax, 0x1235
        mov es, ax
        mov ax, [es:0]
        mov [RESULT], ax
        ; PUSH moves SP by 2.
        mov bx, sp
        push ax
        sub bx, sp
        pop ax
        mov [RESULT + 2], bx
        ; LOOP with CX.
        xor ax, ax
        mov cx, 10
.lp:    inc ax
        loop .lp
        mov [RESULT + 4], ax
        ; REP MOVSB with 16-bit SI/DI: copy "abcd" to 0x9000.
        xor ax, ax
        mov es, ax
        mov si, REAL_BASE + .text - real_blob
        mov di, 0x9000
        mov cx, 4
        cld
        rep movsb
        ; A 16-bit relative jump that would leave the segment without wrapping.
        mov word [RESULT + 6], 1
        jmp short .j
        mov word [RESULT + 6], 2
.j:     mov word [RESULT + 6], 0
        ; Back to protected mode.
        mov eax, cr0
        or eax, 1
        mov cr0, eax
        jmp dword 0x08:back32
.text:  db "abcd"
real_blob_end:

        bits 32
        align 8
gdt:    dq 0
        dq 0x00cf9a000000ffff           ; 0x08 32-bit code
        dq 0x00cf92000000ffff           ; 0x10 32-bit data
        dq 0x00009a000000ffff           ; 0x18 16-bit code, base 0, limit 0xffff
        dq 0x000092000000ffff           ; 0x20 16-bit data
        dq 0x00af9a000000ffff           ; 0x28 64-bit code
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
saved_esp: dd 0
        align 16
        times 4096 db 0
stack_top:
%include "tail.inc"
