; realmode.asm - issue 5 areas 1 and 4: real mode.
; From protected mode into real mode (CR0.PE=0) and back. In real mode: INT n through the
; IVT (frame FLAGS/CS/IP, IF cleared on entry, IRET restores it), #DE/#UD/INT3 through the
; IVT with the right saved IP, LIDT moving the IVT, 66/67 prefixes (32-bit operands and
; addresses in 16-bit code), PUSHA/POPA and PUSHAD, DAA/DAS/AAA/AAM/AAD, 16-bit effective
; address wrap ([BX+SI] past 0xffff). Results are written to memory and checked in
; protected mode. Not checked: a word access at offset 0xffff (#GP/#SS on hardware, QEMU
; does not check real-mode limits) and TF on INT.
%include "lib.inc"

REAL_BASE   equ 0x8000
RES         equ 0x7000                  ; result flags: one word per check, 1 = pass
NRES        equ 16
%define R(x) (REAL_BASE + (x) - real_blob)

%macro PASS16 1                         ; mark check %1 passed if ZF=1
        jnz %%no
        mov word [RES + 2 * %1], 1
%%no:
%endmacro

%macro RCHECK 2+
        cmp word [RES + 2 * %1], 1
        CHECK32 e, %2
%endmacro

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
        mov al, 0xff                    ; mask the PICs: real-mode code runs with IF=1
        out 0x21, al
        out 0xa1, al
        PUTS32 "realmode: protected mode, entering real mode"
        mov edi, RES
        xor eax, eax
        mov ecx, NRES
        rep stosw
        mov esi, real_blob
        mov edi, REAL_BASE
        mov ecx, real_blob_end - real_blob
        cld
        rep movsb
        mov [saved_esp], esp
        jmp 0x18:REAL_BASE
back32:
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov fs, ax
        mov gs, ax
        mov esp, [saved_esp]
        PUTS32 "realmode: back in protected mode"
        RCHECK 0, "INT n through the IVT: frame IP/CS/FLAGS, IF cleared in the handler"
        RCHECK 1, "IRET restores IF"
        RCHECK 2, "#DE through the IVT, saved IP = the DIV"
        RCHECK 3, "#UD through the IVT, saved IP = the UD2"
        RCHECK 4, "INT3 through the IVT, saved IP = after INT3"
        RCHECK 5, "LIDT moves the real-mode IVT"
        RCHECK 6, "66 prefix: 32-bit arithmetic in 16-bit code"
        RCHECK 7, "67 prefix: 32-bit addressing [EBX+ECX*4] in 16-bit code"
        RCHECK 8, "16-bit effective address wraps at 0xffff ([BX+SI])"
        RCHECK 9, "PUSHA/POPA: 16 bytes, original SP stored, SP not popped"
        RCHECK 10, "PUSHAD/POPAD in 16-bit code: 32 bytes"
        RCHECK 11, "DAA and DAS"
        RCHECK 12, "AAA"
        RCHECK 13, "AAM and AAD"
        RCHECK 14, "16-bit address size uses SI, not ESI"
        PUTS32 "realmode: PASS"
        EXIT32 0

; ---- real-mode blob, runs at REAL_BASE with CS=0 ----
        bits 16
real_blob:
        mov ax, 0x20
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov eax, cr0
        and eax, ~1
        mov cr0, eax
        jmp 0x0000:R(.real)
.real:
        xor ax, ax
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov sp, 0x7c00
        lidt [R(ivt_desc)]
        mov word [0x60 * 4], R(h60)
        mov word [0x60 * 4 + 2], 0
        mov word [0 * 4], R(hde)
        mov word [0 * 4 + 2], 0
        mov word [6 * 4], R(hud)
        mov word [6 * 4 + 2], 0
        mov word [3 * 4], R(hbp)
        mov word [3 * 4 + 2], 0
        ; INT n and IRET.
        sti
        int 0x60
.after60:
        pushf
        pop ax
        test ax, 0x200
        jz .no1
        cmp ax, ax
        PASS16 1
.no1:   cli
        ; #DE, #UD, INT3.
        xor cx, cx
        mov ax, 1
        xor dx, dx
.div:   div cx
        ud2                             ; skipped: the #DE handler resumes after it
.ud:    ud2
        int3
.afterbp:
        ; LIDT: a second IVT at 0x5000.
        mov word [0x5000 + 0x60 * 4], R(h60b)
        mov word [0x5000 + 0x60 * 4 + 2], 0
        lidt [R(ivt2_desc)]
        int 0x60
        lidt [R(ivt_desc)]
        ; 66 prefix.
        mov eax, 0x12345678
        add eax, 0x11111111
        cmp eax, 0x23456789
        PASS16 6
        ; 67 prefix.
        mov dword [0x6010], 0xcafef00d
        mov ebx, 0x6000
        mov ecx, 4
        mov eax, [ebx + ecx * 4]
        cmp eax, 0xcafef00d
        PASS16 7
        ; 16-bit address wrap: BX=0xfff0, SI=0x20 -> 0x0010.
        mov word [0x0010 + 0x500], 0x1234
        mov ax, 0x50
        mov es, ax                      ; ES base 0x500
        mov bx, 0xfff0
        mov si, 0x20
        mov ax, [es:bx + si]
        cmp ax, 0x1234
        PASS16 8
        xor ax, ax
        mov es, ax
        ; PUSHA / POPA.
        mov ax, 1
        mov cx, 2
        mov dx, 3
        mov bx, 4
        mov bp, 6
        mov si, 7
        mov di, 8
        mov [R(sp_before)], sp
        pusha
        mov bp, sp
        mov ax, [R(sp_before)]
        sub ax, sp
        cmp ax, 16
        jne .pa
        mov ax, [R(sp_before)]
        cmp [bp + 6], ax                ; stored SP
        jne .pa
        cmp word [bp + 14], 1           ; AX pushed first
        jne .pa
        cmp word [bp], 8                ; DI pushed last
        jne .pa
        mov ax, 0x99
        mov di, 0x99
        popa
        cmp sp, [R(sp_before)]
        jne .pa
        cmp ax, 1
        jne .pa
        cmp di, 8
        jne .pa
        cmp bp, 6
.pa:    PASS16 9
        mov [R(sp_before)], sp
        pushad
        mov ax, [R(sp_before)]
        sub ax, sp
        mov [R(sp_diff)], ax
        popad
        cmp word [R(sp_diff)], 32
        PASS16 10
        ; DAA / DAS.
        mov al, 0x19
        add al, 0x28                    ; 0x41, AF
        daa                             ; 0x47
        mov bl, al
        mov al, 0x42
        sub al, 0x15                    ; 0x2d
        das                             ; 0x27
        mov bh, al
        mov al, 0x99
        add al, 0x01
        daa                             ; 0x00, CF
        setc cl
        cmp bx, 0x2747
        jne .d
        cmp ax, 0                       ; (AH was 0)
        jne .d
        cmp cl, 1
.d:     PASS16 11
        ; AAA: AX=0x0008 + 5 -> AL=0x0d -> AX=0x0103, CF=AF=1.
        mov ax, 0x0008
        add al, 5
        aaa
        setc cl
        cmp ax, 0x0103
        jne .aa
        cmp cl, 1
.aa:    PASS16 12
        ; AAM / AAD.
        mov ax, 0x003f
        aam                             ; AH=6, AL=3
        cmp ax, 0x0603
        jne .am
        aad                             ; AL=63, AH=0
        cmp ax, 0x003f
        jne .am
        mov ax, 0x0000 + 100
        aam 16                          ; AH=6, AL=4
        cmp ax, 0x0604
.am:    PASS16 13
        ; 32-bit register value as a 16-bit segment offset: ESI upper half is ignored
        ; with a 16-bit address size.
        mov dword [0x6020], 0x0badcafe
        mov esi, 0xabcd6020
        mov eax, [si]
        cmp eax, 0x0badcafe
        PASS16 14
        ; back to protected mode
        cli
        mov eax, cr0
        or eax, 1
        mov cr0, eax
        jmp dword 0x08:back32

h60:    push bp
        mov bp, sp
        pushf
        pop ax
        test ax, 0x200                  ; IF clear in the handler
        jnz .x
        test word [bp + 6], 0x200       ; pushed FLAGS has IF
        jz .x
        cmp word [bp + 4], 0            ; pushed CS
        jne .x
        cmp word [bp + 2], R(real_blob.after60)
        jne .x
        mov word [RES + 0], 1
.x:     pop bp
        iret

h60b:   mov word [RES + 10], 1
        iret

hde:    push bp
        mov bp, sp
        cmp word [bp + 2], R(real_blob.div)
        jne .x
        mov word [RES + 4], 1
.x:     add word [bp + 2], 4            ; skip DIV (2) and the UD2 after it (2)
        pop bp
        iret

hud:    push bp
        mov bp, sp
        cmp word [bp + 2], R(real_blob.ud)
        jne .x
        mov word [RES + 6], 1
.x:     add word [bp + 2], 2
        pop bp
        iret

hbp:    push bp
        mov bp, sp
        cmp word [bp + 2], R(real_blob.afterbp)
        jne .x
        mov word [RES + 8], 1
.x:     pop bp
        iret

ivt_desc:
        dw 0x3ff
        dd 0
ivt2_desc:
        dw 0x3ff
        dd 0x5000
sp_before: dw 0
sp_diff: dw 0
real_blob_end:

        bits 32
        align 8
gdt:    dq 0
        dq 0x00cf9a000000ffff           ; 0x08 32-bit code
        dq 0x00cf92000000ffff           ; 0x10 32-bit data
        dq 0x00009a000000ffff           ; 0x18 16-bit code, base 0, limit 0xffff
        dq 0x000092000000ffff           ; 0x20 16-bit data
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
saved_esp: dd 0
        align 16
        times 4096 db 0
stack_top:
%include "tail.inc"
