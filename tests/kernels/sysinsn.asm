; sysinsn.asm - issue 5 area 5: privilege and system instructions.
; 32-bit protected mode: CPUID feature bits, RDMSR/WRMSR round trips (EFER, STAR, LSTAR,
; SFMASK, KERNEL_GS_BASE, TSC_AUX, PAT, SYSENTER_CS), RDTSC/RDTSCP, CLTS/LMSW/SMSW,
; INVD/WBINVD, MOV DR0-3/DR7, SYSENTER/SYSEXIT; ring 3 with IOPL 0: I/O bitmap allow/deny,
; CLI/STI/HLT/RDPMC/RDMSR/WBINVD/RDTSC(TSD)/MOV CR/CLTS/SYSEXIT -> #GP(0), POPF keeps IF/IOPL.
; Long mode: CR8, SYSCALL with SCE=0 -> #UD, SYSCALL/SYSRET (64-bit and compatibility).
; Not checked (QEMU 7.2 TCG, the reference, does not fault): unknown MSR, reserved EFER/PAT
; bits, non-canonical LSTAR; CR0/CR3/CR4 reserved bits or invalid combinations.
%include "lib.inc"
%include "trap.inc"

%macro FEATURE32 4+                     ; leaf, reg, bit, "name"
        mov eax, %1
        xor ecx, ecx
        cpuid
        bt %2, %3
        CHECK32 c, "CPUID reports ", %4
%endmacro

; WRMSR then RDMSR of msr with hi:lo, expect the same value back.
%macro MSR_RT 4+                        ; msr, hi, lo, "what"
        mov ecx, %1
        mov edx, %2
        mov eax, %3
        wrmsr
        xor eax, eax
        xor edx, edx
        rdmsr
        cmp eax, %3
        jne %%f
        cmp edx, %2
%%f:
        CHECK32 e, "WRMSR/RDMSR round trip: ", %4
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
        mov al, 0xff                    ; mask both PICs: IF=1 is used below
        out 0x21, al
        out 0xa1, al
        call trap_install32
        PUTS32 "sysinsn: 32-bit protected mode"
        FEATURE32 1, edx, 5, "MSR"
        FEATURE32 1, edx, 4, "TSC"
        FEATURE32 1, edx, 11, "SYSENTER/SYSEXIT"
        FEATURE32 0x80000001, edx, 11, "SYSCALL/SYSRET"
        FEATURE32 0x80000001, edx, 20, "NX"
        FEATURE32 0x80000001, edx, 27, "RDTSCP"
        xor eax, eax
        cpuid
        cmp eax, 0xd
        CHECK32 ae, "CPUID leaf 0: max basic leaf >= 0xd"
        cmp ebx, 0
        CHECK32 ne, "CPUID leaf 0: vendor string present"
        mov eax, 0x80000000
        cpuid
        cmp eax, 0x80000008
        CHECK32 ae, "CPUID 0x80000000: max extended leaf >= 0x80000008"

        ; ---- MSRs ----
        mov ecx, 0xc0000080
        rdmsr
        mov esi, eax
        or eax, (1 << 11) | 1           ; NXE, SCE
        wrmsr
        xor eax, eax
        rdmsr
        and eax, (1 << 11) | 1
        cmp eax, (1 << 11) | 1
        CHECK32 e, "EFER.NXE and EFER.SCE read back set"
        mov eax, esi
        xor edx, edx
        wrmsr
        rdmsr
        test eax, (1 << 11) | 1
        CHECK32 z, "EFER.NXE and EFER.SCE read back clear"
        MSR_RT 0xc0000081, 0x00400030, 0x12345678, "STAR"
        MSR_RT 0xc0000082, 0xffff8000, 0x00401000, "LSTAR (canonical)"
        MSR_RT 0xc0000084, 0, 0x00040700, "SFMASK"
        MSR_RT 0xc0000102, 0x00007fff, 0xfedcb000, "KERNEL_GS_BASE"
        MSR_RT 0xc0000103, 0, 0x00001234, "TSC_AUX"
        MSR_RT 0x277, 0x01050406, 0x00070406, "PAT"
        MSR_RT 0x277, 0x00070406, 0x00070406, "PAT (power-on value)"
        MSR_RT 0x174, 0, 0x08, "SYSENTER_CS"
        ; ---- TSC ----
        rdtsc
        mov esi, eax
        mov edi, edx
        mov ecx, 100
.spin:  loop .spin
        rdtsc
        sub eax, esi
        sbb edx, edi
        CHECK32 nc, "RDTSC does not go backwards"
        mov ecx, 0xc0000103
        xor edx, edx
        mov eax, 0x5a5a
        wrmsr
        xor ecx, ecx
        rdtscp
        cmp ecx, 0x5a5a
        CHECK32 e, "RDTSCP loads ECX with TSC_AUX"

        ; ---- control registers ----
        mov eax, cr0
        or eax, 1 << 3                  ; TS
        mov cr0, eax
        clts
        mov eax, cr0
        test eax, 1 << 3
        CHECK32 z, "CLTS clears CR0.TS"
        mov ebx, cr0
        mov ax, 0x000e                  ; PE=0 (ignored), MP, EM, TS
        lmsw ax
        mov eax, cr0
        mov ecx, eax
        and ecx, 0xf
        cmp ecx, 0xf
        CHECK32 e, "LMSW sets MP/EM/TS and cannot clear PE"
        smsw cx
        cmp cx, ax
        CHECK32 e, "SMSW r16 returns CR0[15:0]"
        smsw [scratch]
        cmp [scratch], ax
        CHECK32 e, "SMSW m16 returns CR0[15:0]"
        mov cr0, ebx
        invd
        wbinvd
        PUTS32 "ok: INVD and WBINVD complete at ring 0"

        ; ---- debug registers ----
        mov eax, 0x11111110
        mov dr0, eax
        mov eax, 0x22222220
        mov dr1, eax
        mov eax, 0x33333330
        mov dr2, eax
        mov eax, 0x44444440
        mov dr3, eax
        mov eax, 0x700                  ; LE, GE, bit 10 (reads as 1); no breakpoint enabled
        mov dr7, eax
        mov eax, dr0
        cmp eax, 0x11111110
        jne .dbad
        mov eax, dr1
        cmp eax, 0x22222220
        jne .dbad
        mov eax, dr2
        cmp eax, 0x33333330
        jne .dbad
        mov eax, dr3
        cmp eax, 0x44444440
        jne .dbad
        mov eax, dr7
        cmp eax, 0x700
.dbad:  CHECK32 e, "MOV DR0-DR3 and DR7 round trip"
        mov eax, 0x400
        mov dr7, eax
        mov eax, cr4
        or eax, 1 << 3                  ; DE: DR4/DR5 are #UD
        mov cr4, eax
        TRY32 .dr4
        mov eax, dr4
.dr4:   EXPECT32 6, 0, "MOV from DR4 with CR4.DE=1 -> #UD"
        mov eax, cr4
        and eax, ~(1 << 3)
        mov cr4, eax

        ; ---- SYSENTER / SYSEXIT ----
        mov ecx, 0x174
        xor edx, edx
        mov eax, 0x08
        wrmsr
        mov ecx, 0x175
        mov eax, sysenter_stack_top
        wrmsr
        mov ecx, 0x176
        mov eax, sysenter_entry
        wrmsr
        mov [trap_saved_esp], esp
        mov edx, sysexit_ring3
        mov ecx, ustack_top - 16
        sysexit
sysexit_ring3:
        mov eax, cs
        cmp eax, 0x1b
        jne .sx
        mov eax, ss
        cmp eax, 0x23
        jne .sx
        cmp esp, ustack_top - 16
.sx:    CHECK32 e, "SYSEXIT to ring 3: CS=0x1b, SS=0x23, ESP=ECX"
        ; SYSEXIT leaves DS/ES alone, but the IRET back from the #GP handlers below would
        ; null a DPL-0 DS at ring 3 (and a later access through it faults; QEMU does not
        ; check null-segment use): use the ring-3 data segment.
        mov ax, 0x23
        mov ds, ax
        mov es, ax
        TRY32 .s1
        sysexit
.s1:    EXPECT32 13, 0, "SYSEXIT at ring 3 -> #GP(0)"
        TRY32 .s3
        sti
.s3:    EXPECT32 13, 0, "ring 3 STI with IOPL 0 -> #GP(0)"
        sysenter
sysenter_entry:
        mov esi, cs
        mov edi, ss
        mov ebx, esp
        pushfd
        pop edx
        mov ax, 0x10
        mov ds, ax
        mov es, ax
        mov esp, [trap_saved_esp]
        cmp esi, 0x08
        jne .se
        cmp edi, 0x10
        jne .se
        cmp ebx, sysenter_stack_top
.se:    CHECK32 e, "SYSENTER to ring 0: CS=0x08, SS=0x10, ESP=SYSENTER_ESP"
        mov ecx, 0x174
        xor edx, edx
        xor eax, eax
        wrmsr
        TRY32 .s2
        sysenter
.s2:    EXPECT32 13, 0, "SYSENTER with SYSENTER_CS=0 -> #GP(0)"

        ; ---- ring 3 with IOPL 0 ----
        or byte [tss32_iomap + 0x84 / 8], 1 << (0x84 % 8)   ; deny port 0x84
        mov eax, cr4
        or eax, 1 << 2                  ; TSD
        mov cr4, eax
        RING3_32 r3
r3:     mov ax, 0x23
        mov ds, ax
        mov es, ax
        TRY32 .p1
        mov al, 0
        out 0x80, al
.p1:    EXPECT32 -1, -1, "ring 3 OUT to port 0x80 allowed by the I/O bitmap"
        TRY32 .p2
        mov al, 0
        out 0x84, al
.p2:    EXPECT32 13, 0, "ring 3 OUT to port 0x84 denied by the I/O bitmap -> #GP(0)"
        TRY32 .p3
        mov dx, 0x82
        in eax, dx                      ; ports 0x82-0x85: 0x84 denied
.p3:    EXPECT32 13, 0, "ring 3 32-bit IN covering a denied port -> #GP(0)"
        TRY32 .p4
        cli
.p4:    EXPECT32 13, 0, "ring 3 CLI with IOPL 0 -> #GP(0)"
        TRY32 .p5
        hlt
.p5:    EXPECT32 13, 0, "ring 3 HLT -> #GP(0)"
        TRY32 .p6
        xor ecx, ecx
        rdpmc
.p6:    EXPECT32 13, 0, "ring 3 RDPMC with CR4.PCE=0 -> #GP(0)"
        TRY32 .p7
        mov ecx, 0x10
        rdmsr
.p7:    EXPECT32 13, 0, "ring 3 RDMSR -> #GP(0)"
        TRY32 .p8
        wbinvd
.p8:    EXPECT32 13, 0, "ring 3 WBINVD -> #GP(0)"
        TRY32 .p9
        rdtsc
.p9:    EXPECT32 13, 0, "ring 3 RDTSC with CR4.TSD=1 -> #GP(0)"
        TRY32 .p10
        mov eax, cr0
.p10:   EXPECT32 13, 0, "ring 3 MOV from CR0 -> #GP(0)"
        TRY32 .p11
        clts
.p11:   EXPECT32 13, 0, "ring 3 CLTS -> #GP(0)"
        TRY32 .p12
        mov eax, dr7
.p12:   EXPECT32 13, 0, "ring 3 MOV from DR7 -> #GP(0)"
        TRY32 .p13
        invd
.p13:   EXPECT32 13, 0, "ring 3 INVD -> #GP(0)"
        TRY32 .p14
        lgdt [gdt_desc]
.p14:   EXPECT32 13, 0, "ring 3 LGDT -> #GP(0)"
        push dword 0x3200 | 0x2         ; IF=1, IOPL=3
        popfd
        pushfd
        pop eax
        test eax, 0x3200
        CHECK32 z, "ring 3 POPF with IOPL 0 leaves IF and IOPL unchanged"
        pushfd
        pop eax
        test eax, 0x200
        CHECK32 z, "STI at ring 3 with IOPL 0 did not set IF"
        RING0_32 r0
r0:     mov eax, cr4
        and eax, ~(1 << 2)
        mov cr4, eax
        rdtsc
        PUTS32 "ok: RDTSC at ring 0 with CR4.TSD=1"

        ; ---- long mode ----
        call lm_enter
        jmp 0x30:lm64

        bits 64
lm64:
        mov ax, 0x38
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov rsp, stack_top
        call trap_install64
        PUTS64 "sysinsn: long mode"
        mov rax, 7
        mov cr8, rax
        xor eax, eax
        mov rax, cr8
        cmp rax, 7
        CHECK64 e, "MOV CR8 round trip"
        xor eax, eax
        mov cr8, rax
        ; SYSCALL with EFER.SCE=0: #UD.
        mov ecx, 0xc0000080
        rdmsr
        and eax, ~1
        wrmsr
        TRY64 .u1
        syscall
.u1:    EXPECT64 6, 0, "SYSCALL with EFER.SCE=0 -> #UD"
        mov ecx, 0xc0000080
        rdmsr
        or eax, 1
        wrmsr
        mov ecx, 0xc0000081             ; STAR: SYSCALL CS 0x30, SYSRET base 0x40
        mov edx, 0x00400030
        xor eax, eax
        wrmsr
        mov ecx, 0xc0000082
        lea rax, [rel syscall_entry]
        mov rdx, rax
        shr rdx, 32
        wrmsr
        mov ecx, 0xc0000084             ; SFMASK: IF, DF, AC
        mov eax, 0x40600
        xor edx, edx
        wrmsr
        ; SYSRET from ring 0 into ring 3 (RSP is not switched: set it first).
        mov [rel trap_saved_esp], rsp
        lea rcx, [rel sysret_ring3]
        mov r11, 0x202                  ; IF
        mov rsp, ustack_top
        o64 sysret
sysret_ring3:
        mov ax, cs
        cmp ax, 0x53
        jne .sr
        mov ax, ss
        cmp ax, 0x4b
        jne .sr
        pushfq
        pop rax
        test eax, 0x200
.sr:    CHECK64 nz, "SYSRET to 64-bit ring 3: CS=0x53, SS=0x4b, RFLAGS=R11"
        TRY64 .s1
        o64 sysret
.s1:    EXPECT64 13, 0, "SYSRET at ring 3 -> #GP(0)"
        std
        syscall
after_syscall:
        cld
        mov ax, cs
        cmp ax, 0x53
        jne .sc
        cmp qword [rel sc_rcx], 0
        jne .sc
        cmp qword [rel sc_cs], 0x30
        jne .sc
        cmp qword [rel sc_ss], 0x38
        jne .sc
        cmp qword [rel sc_r11], 0
.sc:    CHECK64 e, "SYSCALL: CS=0x30, SS=0x38, RCX=next RIP, R11=old RFLAGS, SFMASK cleared IF/DF; SYSRET back"
        ; SYSRET to compatibility mode (32-bit operand size): CS = STAR[63:48] | 3.
        RING0_64 r0_again
r0_again:
        lea rcx, [rel sysret_compat]
        mov r11, 0x2
        mov rsp, ustack_top
        sysret
        bits 32
sysret_compat:
        mov eax, cs
        cmp eax, 0x43
        jne .sc
        mov eax, ss
        cmp eax, 0x4b
        ; Compatibility mode uses segmentation again: DS/ES (nulled by the IRETQ to ring 3
        ; earlier) must hold a usable selector before the next data access. QEMU does not
        ; check null-segment use, the SDM does.
        mov dx, 0x4b
        mov ds, dx
        mov es, dx
.sc:    CHECK32 e, "32-bit SYSRET to compatibility mode: CS=0x43, SS=0x4b"
        mov dword [trap_ring0_cont], done64
        mov dword [trap_ring0_cont + 4], 0
        int 0x80
        bits 64
done64:
        PUTS64 "sysinsn: PASS"
        mov al, 0
        jmp exit64

syscall_entry:
        ; RSP is still the user's: record on the kernel side through absolute stores.
        mov [rel sc_rcx], rcx
        mov [rel sc_r11], r11
        mov ax, cs
        movzx eax, ax
        mov [rel sc_cs], rax
        mov ax, ss
        movzx eax, ax
        mov [rel sc_ss], rax
        pushfq
        pop rax
        mov [rel sc_rfl], rax
        ; expected values: RCX = after_syscall, R11 has IF and DF, RFLAGS has neither.
        lea rax, [rel after_syscall]
        sub [rel sc_rcx], rax
        mov rax, r11
        and eax, 0x600
        cmp eax, 0x600
        jne .bad
        test qword [rel sc_rfl], 0x40600
        jnz .bad
        mov qword [rel sc_r11], 0
.bad:   o64 sysret                      ; RCX/R11 untouched: back after SYSCALL

        align 8
sc_rcx: dq -1
sc_r11: dq -1
sc_cs:  dq 0
sc_ss:  dq 0
sc_rfl: dq 0
scratch: dq 0
        bits 32
        GDT_STD
gdt_end:
gdt_desc:
        dw gdt_end - gdt - 1
        dd gdt
        align 16
        times 1024 db 0
sysenter_stack_top:
        times 4096 db 0
stack_top:
%include "tail.inc"
