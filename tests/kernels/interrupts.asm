; interrupts.asm - issue 5 area 4: exceptions and interrupts.
; Protected mode: #DE, #UD, INT n through interrupt and trap gates, privilege change from
; ring 3 to ring 0 through the TSS (ESP0), IRET back to ring 3, INT n to a DPL-0 gate from
; ring 3 -> #GP with the IDT error code. Long mode: #PF with CR2 and error code on an IST
; stack, IRETQ, #GP with a not-present gate escalating to #DF.
%include "lib.inc"

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
        ; TSS descriptor base, ESP0/SS0.
        mov eax, tss
        mov [gdt_tss + 2], ax
        shr eax, 16
        mov [gdt_tss + 4], al
        mov [gdt_tss + 7], ah
        mov dword [tss + 4], kstack_top     ; ESP0
        mov dword [tss + 8], 0x10           ; SS0
        mov ax, 0x28
        ltr ax
        ; IDT gates.
        mov eax, isr_de
        mov ebx, 0
        mov dl, 0x8e                        ; present, DPL0, 32-bit interrupt gate
        call set_gate32
        mov eax, isr_ud
        mov ebx, 6
        call set_gate32
        mov eax, isr_gp
        mov ebx, 13
        call set_gate32
        mov eax, isr_80
        mov ebx, 0x80
        mov dl, 0xef                        ; present, DPL3, 32-bit trap gate
        call set_gate32
        mov eax, isr_80
        mov ebx, 0x81
        mov dl, 0x8f                        ; DPL0 trap gate: INT from ring 3 -> #GP
        call set_gate32
        mov eax, isr_back_to_ring0
        mov ebx, 0x82
        mov dl, 0xee                        ; DPL3 interrupt gate
        call set_gate32
        lidt [idt_desc]
        PUTS32 "interrupts: protected mode IDT loaded"

        ; #DE from DIV by zero: the handler skips the 2-byte DIV.
        xor ecx, ecx
        mov eax, 1
        xor edx, edx
        div ecx
        cmp dword [last_vector], 0
        CHECK32 e, "#DE delivered through a 32-bit interrupt gate"
        ; #UD from UD2.
        ud2
        cmp dword [last_vector], 6
        CHECK32 e, "#UD delivered"
        ; INT 0x80 at ring 0 through a trap gate: IF unchanged (trap gate).
        mov dword [saw_cs], 0
        int 0x80
        cmp dword [saw_cs], 0x08
        CHECK32 e, "INT 0x80 from ring 0: same-privilege frame (CS=0x08)"

        ; Into ring 3 with IRET.
        push dword 0x23                     ; SS (ring-3 data, RPL 3)
        push dword ustack_top
        push dword 0x202                    ; EFLAGS: IF
        push dword 0x1b                     ; CS (ring-3 code, RPL 3)
        push dword ring3
        iret
ring3:
        mov ax, 0x23
        mov ds, ax
        mov es, ax
        ; INT 0x80 from ring 3: privilege change, frame holds the ring-3 SS:ESP.
        mov dword [saw_cs], 0
        int 0x80
        cmp dword [saw_cs], 0x1b
        jne .bad
        cmp dword [saw_ss], 0x23
        jne .bad
        cmp dword [saw_esp], ustack_top
        jne .bad
        cmp dword [saw_kesp_ok], 1
        jne .bad
        ; INT 0x81 (gate DPL 0) from ring 3: #GP with error code 0x81*8+2.
        mov dword [last_vector], 0
        int 0x81
        cmp dword [last_vector], 13
        jne .bad
        cmp dword [last_error], 0x81 * 8 + 2
        jne .bad
        mov dword [ring3_ok], 1
.bad:   int 0x82                            ; back to ring 0 for good
back_in_ring0:
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        cmp dword [ring3_ok], 1
        CHECK32 e, "ring 3 -> ring 0 through a DPL3 gate with TSS ESP0, IRET back, DPL check #GP(0x40a)"

        ; ---- long mode ----
        call enter_long_mode
        jmp 0x30:lm64

        bits 64
lm64:
        mov ax, 0x10
        mov ds, ax
        mov ss, ax
        mov rsp, stack_top
        PUTS64 "interrupts: long mode"
        ; 64-bit TSS: IST1.
        mov rax, tss64
        mov [gdt_tss64 + 2], ax
        shr rax, 16
        mov [gdt_tss64 + 4], al
        mov [gdt_tss64 + 7], ah
        shr rax, 16
        mov [gdt_tss64 + 8], eax
        mov rax, ist1_top
        mov [tss64 + 0x24], rax             ; IST1
        mov rax, kstack_top
        mov [tss64 + 4], rax                ; RSP0
        mov ax, 0x38
        ltr ax
        ; 64-bit IDT: #PF on IST1, #DF, #GP gate not present.
        lea rax, [rel isr64_pf]
        mov ebx, 14
        mov dl, 0x8e
        mov dh, 1                           ; IST1
        call set_gate64
        lea rax, [rel isr64_df]
        mov ebx, 8
        mov dh, 0
        call set_gate64
        lea rax, [rel isr64_pf]
        mov ebx, 13
        mov dl, 0x0e                        ; not present
        call set_gate64
        lidt [rel idt64_desc]
        ; #PF: read at 0x40000000 (beyond the 1 GiB identity map: not present).
        mov rbx, 0x40000000
        mov rax, [rbx]                      ; 3 bytes: 48 8B 03
        cmp qword [rel pf_cr2], 0x40000000
        CHECK64 e, "#PF sets CR2 to the faulting address"
        cmp qword [rel pf_err], 0
        CHECK64 e, "#PF error code 0 (not present, read, supervisor)"
        cmp qword [rel pf_on_ist], 1
        CHECK64 e, "#PF handler ran on the IST1 stack"
        ; #GP through a not-present gate: #NP during #GP delivery -> #DF.
        mov [rel df_rsp], rsp
        mov rax, 0x8000000000000000
        mov rax, [rax]                      ; non-canonical: #GP
df_back:
        cmp qword [rel df_seen], 1
        CHECK64 e, "#NP while delivering #GP escalates to #DF (error code 0)"
        PUTS64 "interrupts: PASS"
        mov al, 0
        jmp exit64

isr64_pf:
        mov rax, cr2
        mov [rel pf_cr2], rax
        pop rax                             ; error code
        mov [rel pf_err], rax
        mov rax, rsp
        mov rbx, ist1_top
        sub rbx, rax
        cmp rbx, 64
        ja .notist
        mov qword [rel pf_on_ist], 1
.notist:
        add qword [rsp], 3                  ; skip the faulting MOV
        iretq

isr64_df:
        pop rax
        mov [rel df_err], rax
        cmp rax, 0
        jne .no
        mov qword [rel df_seen], 1
.no:    mov rsp, [rel df_rsp]
        jmp df_back

set_gate64:                                 ; rax = handler, ebx = vector, dl = type, dh = IST
        push rdi
        lea rdi, [rel idt64]
        shl rbx, 4
        add rdi, rbx
        mov [rdi], ax
        mov word [rdi + 2], 0x30
        mov [rdi + 4], dh
        mov [rdi + 5], dl
        shr rax, 16
        mov [rdi + 6], ax
        shr rax, 16
        mov [rdi + 8], eax
        mov dword [rdi + 12], 0
        pop rdi
        ret

        bits 32
enter_long_mode:
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
        add eax, 0x200000
        add edi, 8
        loop .pd
        mov eax, cr4
        or eax, 1 << 5
        mov cr4, eax
        mov eax, PML4
        mov cr3, eax
        mov ecx, 0xc0000080
        rdmsr
        or eax, 1 << 8
        wrmsr
        mov eax, cr0
        or eax, 1 << 31
        mov cr0, eax
        ret

set_gate32:                                 ; eax = handler, ebx = vector, dl = type byte
        lea edi, [idt + ebx * 8]
        mov [edi], ax
        mov word [edi + 2], 0x08
        mov byte [edi + 4], 0
        mov [edi + 5], dl
        shr eax, 16
        mov [edi + 6], ax
        ret

isr_de:
        mov dword [last_vector], 0
        add dword [esp], 2
        iret
isr_ud:
        mov dword [last_vector], 6
        add dword [esp], 2
        iret
isr_gp:
        mov dword [last_vector], 13
        pop dword [last_error]
        add dword [esp], 2                  ; skip the 2-byte INT 0x81
        iret
isr_80:
        mov eax, [esp + 4]
        mov [saw_cs], eax
        test eax, 3
        jz .same
        mov eax, [esp + 12]
        mov [saw_esp], eax
        mov eax, [esp + 16]
        mov [saw_ss], eax
        mov eax, esp
        cmp eax, kstack_top - 20
        jne .same
        mov dword [saw_kesp_ok], 1
.same:  iret
isr_back_to_ring0:
        mov esp, stack_top
        jmp back_in_ring0

        align 8
gdt:    dq 0
        dq 0x00cf9a000000ffff               ; 0x08 ring-0 code
        dq 0x00cf92000000ffff               ; 0x10 ring-0 data
        dq 0x00cffa000000ffff               ; 0x18 ring-3 code
        dq 0x00cff2000000ffff               ; 0x20 ring-3 data
gdt_tss:
        dq 0x0000890000000067               ; 0x28 32-bit TSS (base patched)
        dq 0x00af9a000000ffff               ; 0x30 64-bit code
gdt_tss64:
        dq 0x0000890000000067               ; 0x38 64-bit TSS (16 bytes, base patched)
        dq 0
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
        align 8
idt:    times 256 dq 0
idt_desc:
        dw 256 * 8 - 1
        dd idt
        align 16
idt64:  times 256 dq 0, 0
idt64_desc:
        dw 256 * 16 - 1
        dq idt64
        align 16
tss:    times 104 db 0
tss64:  times 104 db 0
last_vector: dd 0xffffffff
last_error:  dd 0
saw_cs:      dd 0
saw_ss:      dd 0
saw_esp:     dd 0
saw_kesp_ok: dd 0
ring3_ok:    dd 0
        align 8
pf_cr2:     dq 0
pf_err:     dq 0xffff
pf_on_ist:  dq 0
df_rsp:     dq 0
df_err:     dq 0xffff
df_seen:    dq 0
        align 16
        times 4096 db 0
stack_top:
        times 4096 db 0
kstack_top:
        times 4096 db 0
ustack_top:
        times 1024 db 0
ist1_top:
%include "tail.inc"
