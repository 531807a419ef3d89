; paging.asm - issue 5 area 3: paging.
; 32-bit paging (4 KiB pages, 4 MiB pages with CR4.PSE), PAE paging (2 MiB pages, NX fetch
; fault, reserved bit), 4-level paging (4 KiB / 2 MiB / 1 GiB pages). #PF error codes and
; CR2: not present, write to read-only with CR0.WP=1 (and no fault with WP=0), user access
; to a supervisor page and user write to a read-only page from ring 3, reserved bit, NX
; fetch (reserved-bit faults: only RSVD and W/U/I are checked, QEMU 7.2 clears P, hardware
; sets it). Accessed/dirty bits, INVLPG, CR3 reload, clearing CR4.PGE flushes global pages,
; SMEP (supervisor fetch from a user page) and SMAP (supervisor read of a user page, allowed
; with STAC).
%include "lib.inc"
%include "trap.inc"

PD32    equ 0x400000                    ; 32-bit paging: page directory
PT32_0  equ 0x401000                    ;   identity 0-4 MiB, 4 KiB user pages
PT32_2  equ 0x402000                    ;   test pages at V32
PDPT_P  equ 0x403000                    ; PAE: page-directory-pointer table
PD_P    equ 0x404000                    ;   page directory for 0-1 GiB
PML4    equ 0x410000                    ; 4-level
PDPT    equ 0x411000
PD      equ 0x412000
PT      equ 0x413000                    ;   test pages at V64
PA      equ 0x600000                    ; physical test frames with markers
PB      equ 0x601000
MARK_A  equ 0xaaaa0001
MARK_B  equ 0xbbbb0002
V32     equ 0x800000
V64     equ 0x1000000

%macro PTE32 2                          ; index in PT32_2, value
        mov dword [PT32_2 + %1 * 4], %2
        invlpg [V32 + %1 * 0x1000]
%endmacro

%macro PTE64 2                          ; index in PT, value
        mov rax, %2
        mov [PT + %1 * 8], rax
        invlpg [V64 + %1 * 0x1000]
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
        call trap_install32
        PUTS32 "paging: 32-bit protected mode"
        mov eax, 1
        cpuid
        bt edx, 3
        CHECK32 c, "CPUID reports PSE"
        mov eax, 0x80000001
        cpuid
        bt edx, 20
        CHECK32 c, "CPUID reports NX"
        bt edx, 26
        CHECK32 c, "CPUID reports 1 GiB pages"
        mov eax, 7
        xor ecx, ecx
        cpuid
        bt ebx, 7
        CHECK32 c, "CPUID reports SMEP"
        bt ebx, 20
        CHECK32 c, "CPUID reports SMAP"
        mov dword [PA], MARK_A
        mov dword [PB], MARK_B
        mov byte [PA + 0x100], 0xc3     ; RET, for fetch tests

        ; ---- 32-bit paging ----
        mov edi, PD32
        xor eax, eax
        mov ecx, 3 * 4096 / 4
        rep stosd
        mov dword [PD32], PT32_0 | 7
        mov dword [PD32 + 4], 0x400000 | 0x87   ; 4 MiB page, identity 4-8 MiB
        mov dword [PD32 + 8], PT32_2 | 7
        mov dword [PD32 + 12], 0x400000 | 0x83  ; 4 MiB page: 0xc00000 -> 0x400000
        mov edi, PT32_0
        mov eax, 7
        mov ecx, 1024
.pt0:   stosd
        add eax, 0x1000
        loop .pt0
        mov dword [PT32_2], PA | 3
        mov eax, cr4
        or eax, 1 << 4                  ; PSE
        mov cr4, eax
        mov eax, PD32
        mov cr3, eax
        mov eax, cr0
        or eax, (1 << 31) | (1 << 16)   ; PG, WP
        mov cr0, eax
        cmp dword [V32], MARK_A
        CHECK32 e, "32-bit paging: 4 KiB page translation"
        cmp dword [0xe00000], MARK_A
        CHECK32 e, "32-bit paging: 4 MiB page (CR4.PSE) translation"
        PTE32 1, PB | 3
        mov eax, [V32 + 0x1000]
        mov eax, [PT32_2 + 4]
        and eax, 0x60
        cmp eax, 0x20
        CHECK32 e, "read sets the accessed bit, not the dirty bit"
        mov dword [V32 + 0x1000], MARK_B
        mov eax, [PT32_2 + 4]
        and eax, 0x60
        cmp eax, 0x60
        CHECK32 e, "write sets the dirty bit"
        PTE32 2, 0
        TRY32 .f1
        mov eax, [V32 + 0x2000]
.f1:    EXPECT32 14, 0, "#PF read of a not-present page: error code 0"
        cmp dword [trap_cr2], V32 + 0x2000
        CHECK32 e, "#PF CR2 = faulting address"
        PTE32 3, PB | 1
        TRY32 .f2
        mov dword [V32 + 0x3000], MARK_B
.f2:    EXPECT32 14, 3, "#PF write to a read-only page, CPL0, CR0.WP=1: error code 3"
        mov eax, cr0
        and eax, ~(1 << 16)
        mov cr0, eax
        TRY32 .f3
        mov dword [V32 + 0x3000], MARK_B
.f3:    EXPECT32 -1, -1, "write to a read-only page at CPL0 with CR0.WP=0 succeeds"
        mov eax, cr0
        or eax, 1 << 16
        mov cr0, eax
        PTE32 4, PB | 3                 ; supervisor
        PTE32 5, PB | 5                 ; user, read-only
        RING3_32 r3a
r3a:    mov ax, 0x23
        mov ds, ax
        mov es, ax
        TRY32 .u1
        mov eax, [V32 + 0x4000]
.u1:    EXPECT32 14, 5, "#PF ring-3 read of a supervisor page: error code 5"
        TRY32 .u2
        mov dword [V32 + 0x5000], 0
.u2:    EXPECT32 14, 7, "#PF ring-3 write to a read-only user page: error code 7"
        TRY32 .u3
        mov eax, [V32 + 0x5000]
.u3:    EXPECT32 -1, -1, "ring-3 read of a user page works"
        RING0_32 r0a
r0a:
        ; ---- PAE paging ----
        mov eax, cr0
        and eax, ~(1 << 31)
        mov cr0, eax
        mov edi, PDPT_P
        xor eax, eax
        mov ecx, 2 * 4096 / 4
        rep stosd
        mov dword [PDPT_P], PD_P | 1
        mov edi, PD_P
        mov eax, 0x87
        mov ecx, 8
.pdp:   mov [edi], eax
        add eax, 0x200000
        add edi, 8
        loop .pdp
        mov dword [PD_P + 8 * 8], PA | 0x83
        mov dword [PD_P + 9 * 8], PA | 0x83
        mov dword [PD_P + 9 * 8 + 4], 0x80000000        ; NX
        mov dword [PD_P + 10 * 8], PA | 0x83
        mov dword [PD_P + 10 * 8 + 4], 1 << (51 - 32)   ; reserved bit 51
        mov ecx, 0xc0000080
        rdmsr
        or eax, 1 << 11                 ; NXE
        wrmsr
        mov eax, cr4
        or eax, 1 << 5                  ; PAE
        mov cr4, eax
        mov eax, PDPT_P
        mov cr3, eax
        mov eax, cr0
        or eax, 1 << 31
        mov cr0, eax
        PUTS32 "paging: PAE"
        cmp dword [0x1000000], MARK_A
        CHECK32 e, "PAE: 2 MiB page translation"
        mov [saved_sp], esp
        TRY32 .n1
        call 0x1000100
.n1:    mov esp, [saved_sp]
        EXPECT32 -1, -1, "PAE: fetch from a 2 MiB page without NX works"
        TRY32 .n2
        call 0x1200100
.n2:    mov esp, [saved_sp]
        EXPECT32 14, 0x11, "PAE: #PF fetch from an NX page: error code 0x11 (P, I/D)"
        cmp dword [trap_cr2], 0x1200100
        CHECK32 e, "PAE: NX fault CR2 = fetch address"
        TRY32 .n3
        mov eax, [0x1400000]
.n3:    mov eax, [trap_err]             ; P: see the 4-level reserved-bit check
        and eax, ~1
        cmp dword [trap_vec], 14
        jne .n3f
        cmp eax, 8
.n3f:   CHECK32 e, "PAE: #PF on a reserved bit (51): RSVD set, W/U/I clear"

        ; ---- 4-level paging ----
        mov eax, cr0
        and eax, ~(1 << 31)
        mov cr0, eax
        mov edi, PML4
        xor eax, eax
        mov ecx, 4 * 4096 / 4
        rep stosd
        mov dword [PML4], PDPT | 7
        mov dword [PDPT], PD | 7
        mov dword [PDPT + 8], 0x83      ; 1 GiB page: 0x40000000 -> 0
        mov edi, PD
        mov eax, 0x87
        mov ecx, 8
.pd:    mov [edi], eax
        add eax, 0x200000
        add edi, 8
        loop .pd
        mov dword [PD + 8 * 8], PT | 7
        mov dword [PD + 9 * 8], PA | 0x83
        mov eax, PML4
        mov cr3, eax
        mov ecx, 0xc0000080
        rdmsr
        or eax, 1 << 8                  ; LME
        wrmsr
        mov eax, cr0
        or eax, 1 << 31
        mov cr0, eax
        jmp 0x30:lm64

        bits 64
lm64:
        mov ax, 0x38
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov rsp, stack_top
        call trap_install64
        PUTS64 "paging: 4-level"
        PTE64 0, PA | 3
        cmp dword [V64], MARK_A
        CHECK64 e, "4-level: 4 KiB page translation"
        cmp dword [0x1200000], MARK_A
        CHECK64 e, "4-level: 2 MiB page translation"
        cmp dword [0x40000000 + PA], MARK_A
        CHECK64 e, "4-level: 1 GiB page translation"
        mov rax, (1 << 51) | PB | 3
        mov [PT + 8], rax
        invlpg [V64 + 0x1000]
        TRY64 .r1
        mov eax, [V64 + 0x1000]
.r1:    mov rax, [rel trap_err]         ; P is 1 on hardware (0x9), QEMU 7.2 reports 0x8:
        and eax, ~1                     ; check RSVD and the other bits only
        cmp qword [rel trap_vec], 14
        jne .r1f
        cmp eax, 8
.r1f:   CHECK64 e, "4-level: #PF on a reserved bit (51): RSVD set, W/U/I clear"
        cmp qword [rel trap_cr2], V64 + 0x1000
        CHECK64 e, "4-level: CR2 of the reserved-bit fault"
        PTE64 2, PB | 3
        mov eax, [V64 + 0x2000]
        mov eax, [PT + 2 * 8]
        and eax, 0x60
        cmp eax, 0x20
        CHECK64 e, "4-level: read sets A, not D"
        mov dword [V64 + 0x2000], MARK_B
        mov eax, [PT + 2 * 8]
        and eax, 0x60
        cmp eax, 0x60
        CHECK64 e, "4-level: write sets D"
        test byte [PD + 8 * 8], 0x20
        CHECK64 nz, "4-level: the walk set A in the PDE"
        PTE64 3, 0
        TRY64 .r2
        mov eax, [V64 + 0x3000]
.r2:    EXPECT64 14, 0, "4-level: #PF not present: error code 0"
        PTE64 4, PB | 1
        TRY64 .r3
        mov dword [V64 + 0x4000], MARK_B
.r3:    EXPECT64 14, 3, "4-level: #PF write to read-only with WP=1: error code 3"
        mov rax, cr0
        and eax, ~(1 << 16)
        mov cr0, rax
        TRY64 .r4
        mov dword [V64 + 0x4000], MARK_B
.r4:    EXPECT64 -1, -1, "4-level: write to read-only with WP=0 succeeds"
        mov rax, cr0
        or eax, 1 << 16
        mov cr0, rax
        PTE64 5, PB | 3
        PTE64 11, PB | 5
        RING3_64 r3b
r3b:    TRY64 .u1
        mov eax, [V64 + 0x5000]
.u1:    EXPECT64 14, 5, "4-level: #PF ring-3 read of a supervisor page: error code 5"
        TRY64 .u2
        mov dword [V64 + 0xb000], 0
.u2:    EXPECT64 14, 7, "4-level: #PF ring-3 write to a read-only user page: error code 7"
        RING0_64 r0b
r0b:
        ; INVLPG and CR3 reload: the new translation is used afterwards.
        PTE64 6, PA | 3
        cmp dword [V64 + 0x6000], MARK_A
        CHECK64 e, "INVLPG test page maps A"
        mov rax, PB | 3
        mov [PT + 6 * 8], rax
        invlpg [V64 + 0x6000]
        cmp dword [V64 + 0x6000], MARK_B
        CHECK64 e, "after INVLPG the new mapping is used"
        mov rax, PA | 3
        mov [PT + 6 * 8], rax
        mov rax, cr3
        mov cr3, rax
        cmp dword [V64 + 0x6000], MARK_A
        CHECK64 e, "after a CR3 reload the new mapping is used"
        ; Global page: clearing CR4.PGE flushes it.
        mov rax, cr4
        or eax, 1 << 7
        mov cr4, rax
        PTE64 7, PA | 0x103
        cmp dword [V64 + 0x7000], MARK_A
        CHECK64 e, "global page maps A"
        mov rax, PB | 0x103
        mov [PT + 7 * 8], rax
        mov rax, cr4
        and eax, ~(1 << 7)
        mov cr4, rax
        cmp dword [V64 + 0x7000], MARK_B
        CHECK64 e, "after clearing CR4.PGE the new mapping of a global page is used"
        ; NX.
        mov rax, (1 << 63) | PA | 3
        mov [PT + 8 * 8], rax
        invlpg [V64 + 0x8000]
        mov [rel saved_sp], rsp
        TRY64 .x1
        mov rax, V64 + 0x8100
        call rax
.x1:    mov rsp, [rel saved_sp]
        EXPECT64 14, 0x11, "4-level: #PF fetch from an NX page: error code 0x11"
        ; SMEP/SMAP: the identity map becomes supervisor-only first.
        mov edi, PD
        mov eax, 0x83
        mov ecx, 8
.pds:   mov [rdi], eax
        add eax, 0x200000
        add edi, 8
        loop .pds
        mov rax, cr3
        mov cr3, rax
        PTE64 9, PA | 7
        PTE64 10, PA | 7
        TRY64 .x2
        mov rax, V64 + 0x9100
        call rax
.x2:    mov rsp, [rel saved_sp]
        EXPECT64 -1, -1, "fetch from a user page at CPL0 without SMEP works"
        mov rax, cr4
        or eax, 1 << 20                 ; SMEP
        mov cr4, rax
        TRY64 .x3
        mov rax, V64 + 0x9100
        call rax
.x3:    mov rsp, [rel saved_sp]
        EXPECT64 14, 0x11, "SMEP: #PF supervisor fetch from a user page: error code 0x11"
        mov rax, cr4
        and eax, ~(1 << 20)
        or eax, 1 << 21                 ; SMAP
        mov cr4, rax
        TRY64 .x4
        mov eax, [V64 + 0xa000]
.x4:    EXPECT64 14, 1, "SMAP: #PF supervisor read of a user page: error code 1"
        stac
        TRY64 .x5
        mov eax, [V64 + 0xa000]
.x5:    EXPECT64 -1, -1, "SMAP: read of a user page with EFLAGS.AC (STAC) works"
        clac
        TRY64 .x6
        mov dword [V64 + 0xa000], 0
.x6:    EXPECT64 14, 3, "SMAP: #PF supervisor write to a user page after CLAC: error code 3"
        mov rax, cr4
        and eax, ~(1 << 21)
        mov cr4, rax
        PUTS64 "paging: PASS"
        mov al, 0
        jmp exit64

        bits 32
        align 8
saved_sp: dq 0
        GDT_STD
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
        align 16
        times 4096 db 0
stack_top:
%include "tail.inc"
