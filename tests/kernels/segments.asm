; segments.asm - issue 5 area 2: segmentation.
; 32-bit protected mode: SGDT/SIDT/SLDT/STR, LLDT and a segment from the LDT, the hidden
; descriptor cache (a changed GDT entry takes effect only on reload), accesses within the
; limit, expand-down data above the limit, MOV SS with a read-only or null segment (#GP),
; not-present segment (#NP), execute-only code into DS (#GP), LAR/LSL/VERR/VERW, far JMP/CALL/RETF at the same privilege, a call gate from
; ring 3 to ring 0 with the TSS stack switch and RETF back, ARPL.
; Long mode: FS/GS base MSRs, SWAPGS, RD/WR FS/GS BASE (CR4.FSGSBASE, #UD without it),
; 64-bit TSS RSP0 on a ring-3 interrupt.
; Not checked because QEMU 7.2 TCG (the reference) does not fault on them: data/stack
; segment limit violations (#GP/#SS), expand-down violations, writes through a read-only
; data segment, accesses through a null selector, non-canonical WRFSBASE.
%include "lib.inc"
%include "trap.inc"

SEL_LIM     equ 0x68            ; data, limit 0xfff
SEL_RO      equ 0x70            ; read-only data
SEL_EXPD    equ 0x78            ; expand-down data, limit 0xfff (valid 0x1000..0xffffffff)
SEL_NP      equ 0x80            ; not present
SEL_BASE    equ 0x88            ; data, base 0x200000
SEL_XO      equ 0x90            ; execute-only code
SEL_GATE    equ 0x98            ; 32-bit call gate, DPL 3 -> 0x08:gate_target
SEL_LDT     equ 0xa0            ; LDT
SEL_STK     equ 0xa8            ; stack, limit 4 MiB
SEL_LDATA   equ 0x0c            ; LDT entry 1: data, base 0x300000

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
        call trap_install32
        PUTS32 "segments: 32-bit protected mode"
        ; ---- descriptor-table registers ----
        sgdt [scratch]
        mov ax, [gdt_desc]
        cmp ax, [scratch]
        jne .g
        mov eax, [scratch + 2]
        cmp eax, gdt
.g:     CHECK32 e, "SGDT stores the GDT limit and base"
        sidt [scratch]
        mov ax, [idt32_desc]
        cmp ax, [scratch]
        jne .i
        mov eax, [scratch + 2]
        cmp eax, idt32
.i:     CHECK32 e, "SIDT stores the IDT limit and base"
        str ax
        cmp ax, 0x28
        CHECK32 e, "STR returns the TSS selector"
        mov ax, 0xffff
        sldt ax
        cmp ax, 0
        CHECK32 e, "SLDT is 0 before LLDT"
        ; ---- LAR / LSL / VERR / VERW (before any load sets accessed bits) ----
        mov ebx, SEL_LIM
        lar eax, ebx
        jnz .l1
        and eax, 0x00f0fe00
        cmp eax, 0x00009200
.l1:    CHECK32 e, "LAR of a data segment: ZF=1, access rights"
        mov ebx, 0x10
        lar eax, ebx
        jnz .l2
        and eax, 0x00f0fe00
        cmp eax, 0x00c09200
.l2:    CHECK32 e, "LAR of a flat data segment: G and B bits"
        mov ebx, SEL_GATE
        lar eax, ebx
        jnz .l3
        and eax, 0x0000ff00
        cmp eax, 0x0000ec00
.l3:    CHECK32 e, "LAR of a call gate: ZF=1"
        mov eax, 0x1234
        xor ebx, ebx
        lar eax, ebx
        CHECK32 nz, "LAR of the null selector: ZF=0"
        cmp eax, 0x1234
        CHECK32 e, "LAR with ZF=0 leaves the destination unchanged"
        mov ebx, 0x7f8
        lar eax, ebx
        CHECK32 nz, "LAR of a selector beyond the GDT limit: ZF=0"
        mov ebx, SEL_LIM
        lsl eax, ebx
        jnz .l4
        cmp eax, 0xfff
.l4:    CHECK32 e, "LSL of a byte-granular segment: 0xfff"
        mov ebx, 0x10
        lsl eax, ebx
        jnz .l5
        cmp eax, 0xffffffff
.l5:    CHECK32 e, "LSL of a page-granular segment: 0xffffffff"
        mov ebx, SEL_GATE
        lsl eax, ebx
        CHECK32 nz, "LSL of a call gate: ZF=0"
        mov ebx, 0x28
        lsl eax, ebx
        jnz .l6
        cmp eax, 0x2068
.l6:    CHECK32 e, "LSL of the TSS: its limit"
        mov ax, SEL_RO
        verr ax
        CHECK32 z, "VERR of read-only data: ZF=1"
        verw ax
        CHECK32 nz, "VERW of read-only data: ZF=0"
        mov ax, SEL_XO
        verr ax
        CHECK32 nz, "VERR of execute-only code: ZF=0"
        mov ax, 0x08
        verr ax
        CHECK32 z, "VERR of readable code: ZF=1"
        mov ax, 0x10
        verw ax
        CHECK32 z, "VERW of writable data: ZF=1"
        xor ax, ax
        verr ax
        CHECK32 nz, "VERR of the null selector: ZF=0"

        ; ---- LDT ----
        mov eax, ldt
        mov [gdt_ldt + 2], ax
        shr eax, 16
        mov [gdt_ldt + 4], al
        mov [gdt_ldt + 7], ah
        mov ax, SEL_LDT
        lldt ax
        sldt bx
        cmp bx, SEL_LDT
        CHECK32 e, "SLDT returns the LLDT selector"
        mov dword [0x300010], 0
        mov ax, SEL_LDATA
        mov es, ax
        mov dword [es:0x10], 0x1dd71dd7
        mov ax, 0x10
        mov es, ax
        cmp dword [0x300010], 0x1dd71dd7
        CHECK32 e, "segment from the LDT (TI=1) uses the LDT descriptor's base"

        ; ---- hidden descriptor cache ----
        mov dword [0x200000], 0xaaaa
        mov dword [0x210000], 0xbbbb
        mov ax, SEL_BASE
        mov fs, ax
        cmp dword [fs:0], 0xaaaa
        CHECK32 e, "FS base 0x200000 from the GDT"
        mov byte [gdt + SEL_BASE + 4], 0x21     ; base -> 0x210000
        cmp dword [fs:0], 0xaaaa
        CHECK32 e, "changing the GDT entry does not change the loaded FS"
        mov ax, SEL_BASE
        mov fs, ax
        cmp dword [fs:0], 0xbbbb
        CHECK32 e, "reloading FS picks up the new base"

        ; ---- limit and type checks ----
        mov ax, SEL_LIM
        mov fs, ax
        TRY32 .t1
        mov eax, [fs:0xffc]
.t1:    EXPECT32 -1, -1, "dword read ending at the limit works"
        mov ax, SEL_EXPD
        mov fs, ax
        TRY32 .t5
        mov eax, [fs:0x2000]
.t5:    EXPECT32 -1, -1, "expand-down segment: offset above the limit works"
        mov ax, SEL_RO
        mov fs, ax
        TRY32 .t7
        mov eax, [fs:0x200000]
.t7:    EXPECT32 -1, -1, "read from a read-only data segment works"
        xor eax, eax
        mov fs, ax
        PUTS32 "ok: loading the null selector into FS works"
        TRY32 .t10
        mov ax, SEL_RO
        mov ss, ax
.t10:   EXPECT32 13, SEL_RO, "MOV SS with a read-only segment -> #GP(selector)"
        TRY32 .t11
        mov ax, SEL_NP
        mov fs, ax
.t11:   EXPECT32 11, SEL_NP, "MOV FS with a not-present segment -> #NP(selector)"
        TRY32 .t12
        mov ax, SEL_XO
        mov ds, ax
.t12:   EXPECT32 13, SEL_XO, "MOV DS with execute-only code -> #GP(selector)"
        TRY32 .t13
        xor eax, eax
        mov ss, ax
.t13:   EXPECT32 13, 0, "MOV SS with the null selector -> #GP(0)"
        mov ax, 0x10
        mov fs, ax

        ; ---- far transfers ----
        mov dword [saw], 0
        call 0x08:far_proc
        cmp dword [saw], 0x08
        CHECK32 e, "far CALL pushes CS, RETF returns"
        jmp 0x08:.fj
        PUTS32 "FAIL: far JMP fell through"
        EXIT32 1
.fj:    PUTS32 "ok: far JMP"
        mov ax, 0x10
        mov bx, 0x1b
        arpl ax, bx
        jnz .a1
        cmp ax, 0x13
.a1:    CHECK32 e, "ARPL raises RPL, ZF=1"
        arpl ax, bx
        CHECK32 nz, "ARPL with RPL already high enough: ZF=0"
        ; call gate from ring 3
        mov eax, gate_target
        mov [gdt + SEL_GATE], ax
        shr eax, 16
        mov [gdt + SEL_GATE + 6], ax
        RING3_32 r3
r3:     mov ax, 0x23
        mov ds, ax
        mov es, ax
        mov dword [saw], 0
        TRY32 .ll
        mov ax, SEL_LDT
        lldt ax
.ll:    EXPECT32 13, 0, "LLDT at ring 3 -> #GP(0)"
        TRY32 .vr
        mov ax, 0x10
        verr ax
        jnz .vr
        mov dword [trap_vec], 0x55      ; ZF=1 would be wrong: DPL 0 < CPL 3
.vr:    EXPECT32 -1, -1, "VERR at ring 3 of a DPL-0 segment: ZF=0, no fault"
        call (SEL_GATE | 3):0
        mov eax, cs
        cmp eax, 0x1b
        jne .cg
        cmp dword [saw], 1
.cg:    CHECK32 e, "call gate ring 3 -> ring 0 (TSS stack, CS/SS/ESP pushed), RETF back to ring 3"
        RING0_32 r0

gate_target:
        cmp esp, kstack_top - 16
        jne .no
        cmp dword [esp + 4], 0x1b
        jne .no
        cmp dword [esp + 8], ustack_top
        jne .no
        cmp dword [esp + 12], 0x23
        jne .no
        mov eax, cs
        cmp eax, 0x08
        jne .no
        mov eax, ss
        cmp eax, 0x10
        jne .no
        mov dword [saw], 1
.no:    retf

far_proc:
        mov eax, [esp + 4]
        mov [saw], eax
        retf

r0:     ; ---- long mode ----
        call lm_enter
        jmp 0x30:lm64

        bits 64
lm64:
        mov ax, 0x38
        mov ds, ax
        mov es, ax
        mov ss, ax
        xor eax, eax
        mov fs, ax
        mov gs, ax
        mov rsp, stack_top
        call trap_install64
        PUTS64 "segments: long mode"
        mov dword [0x220000], 0x5eed
        mov ecx, 0xc0000100             ; FS_BASE
        mov eax, 0x220000
        xor edx, edx
        wrmsr
        cmp dword [fs:0], 0x5eed
        CHECK64 e, "FS base set through MSR 0xC0000100"
        mov ecx, 0xc0000101             ; GS_BASE
        mov eax, 0x220000
        xor edx, edx
        wrmsr
        cmp dword [gs:0], 0x5eed
        CHECK64 e, "GS base set through MSR 0xC0000101"
        mov ecx, 0xc0000102             ; KERNEL_GS_BASE
        mov eax, 0x230000
        wrmsr
        swapgs
        mov ecx, 0xc0000101
        rdmsr
        cmp eax, 0x230000
        jne .s
        mov ecx, 0xc0000102
        rdmsr
        cmp eax, 0x220000
.s:     CHECK64 e, "SWAPGS exchanges GS_BASE and KERNEL_GS_BASE"
        swapgs
        mov eax, 7
        xor ecx, ecx
        cpuid
        bt ebx, 0
        CHECK64 c, "CPUID reports FSGSBASE"
        TRY64 .u
        rdfsbase rax
.u:     EXPECT64 6, 0, "RDFSBASE with CR4.FSGSBASE=0 -> #UD"
        mov rax, cr4
        bts rax, 16
        mov cr4, rax
        mov rax, 0x00007fff12345000
        wrfsbase rax
        mov ecx, 0xc0000100
        rdmsr
        shl rdx, 32
        or rax, rdx
        mov rbx, 0x00007fff12345000
        cmp rax, rbx
        CHECK64 e, "WRFSBASE is seen by RDMSR FS_BASE"
        rdfsbase rcx
        cmp rcx, rbx
        CHECK64 e, "RDFSBASE round trip"
        mov rax, 0xffff800000001000
        wrgsbase rax
        rdgsbase rcx
        cmp rcx, rax
        CHECK64 e, "WRGSBASE/RDGSBASE round trip"
        xor eax, eax
        wrfsbase rax
        wrgsbase rax
        mov rax, cr4
        btr rax, 16
        mov cr4, rax
        ; 64-bit TSS RSP0: INT from ring 3 lands on RSP0.
        lea rax, [rel isr_rsp0]
        mov ebx, 0x81
        mov dl, 0xee
        call trap_gate64
        RING3_64 r3b
r3b:    TRY64 .sg
        swapgs
.sg:    EXPECT64 13, 0, "SWAPGS at ring 3 -> #GP(0)"
        TRY64 .wf
        wrfsbase rax
.wf:    EXPECT64 6, 0, "WRFSBASE with CR4.FSGSBASE=0 -> #UD (ring 3)"
        mov qword [rel saw_rsp], 0
        int 0x81
        mov rax, kstack_top - 40
        cmp [rel saw_rsp], rax
        CHECK64 e, "ring 3 -> ring 0 interrupt switches to the 64-bit TSS RSP0"
        RING0_64 r0b
r0b:    PUTS64 "segments: PASS"
        mov al, 0
        jmp exit64

isr_rsp0:
        mov [rel saw_rsp], rsp
        iretq

        bits 32
        align 8
saw:     dd 0
saw_rsp: dq 0
scratch: times 16 db 0
        GDT_STD
        dq 0x0000920000000fff           ; 0x68 data, limit 0xfff
        dq 0x00cf90000000ffff           ; 0x70 read-only data
        dq 0x0040960000000fff           ; 0x78 expand-down data, limit 0xfff, B=1
        dq 0x00cf12000000ffff           ; 0x80 not present
        dq 0x00cf92200000ffff           ; 0x88 data, base 0x200000
        dq 0x00cf98000000ffff           ; 0x90 execute-only code
        dq 0x0000ec0000080000           ; 0x98 call gate DPL3 -> 0x08:gate_target (patched)
gdt_ldt:
        dq 0x000082000000000f           ; 0xa0 LDT (base patched)
        dq 0x00c09200000003ff           ; 0xa8 stack data, 4 MiB
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
        align 8
ldt:    dq 0
        dq 0x00cf92300000ffff           ; LDT 1: data, base 0x300000
        align 16
        times 4096 db 0
stack_top:
%include "tail.inc"
