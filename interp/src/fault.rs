//! Architectural exceptions as typed values, and the non-fault reasons an instruction stops the engine.

use std::fmt;

/// An architectural exception raised by an instruction. Decided in one place: the instruction's
/// checks or its memory accesses return it, the engine leaves RIP at the faulting instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// #DE divide error (vector 0).
    DivideError,
    /// #DB debug (vector 1).
    Debug,
    /// #BP breakpoint (vector 3, a trap: RIP is after INT3).
    Breakpoint,
    /// #OF overflow (vector 4).
    Overflow,
    /// #BR bound range (vector 5).
    BoundRange,
    /// #UD invalid opcode (vector 6). `what` names the instruction or the reason.
    InvalidOpcode { what: &'static str },
    /// #NM device not available (vector 7).
    DeviceNotAvailable,
    /// #DF double fault (vector 8).
    DoubleFault,
    /// #TS invalid TSS (vector 10).
    InvalidTss(u16),
    /// #NP segment not present (vector 11).
    SegmentNotPresent(u16),
    /// #SS stack-segment fault (vector 12).
    StackFault(u16),
    /// #GP general protection (vector 13).
    GeneralProtection(u16),
    /// #PF page fault (vector 14) at linear address `addr` with error code `code`.
    PageFault { addr: u64, code: u32 },
    /// #MF x87 floating-point error (vector 16).
    X87Error,
    /// #AC alignment check (vector 17).
    AlignmentCheck,
    /// #XM SIMD floating-point exception (vector 19).
    SimdError,
    /// INT n (CD ib): a software interrupt through vector n, a trap (RIP after the
    /// instruction). Delivery applies the gate-DPL check and clears EXT in error codes.
    SoftwareInterrupt(u8),
    /// INT1 (ICEBP, F1): #DB as a trap (RIP after the instruction), delivered like a hardware
    /// event (no gate-DPL check, EXT set in error codes).
    Int1,
}

impl Fault {
    /// #UD naming what is unsupported or invalid.
    pub const fn ud(what: &'static str) -> Fault {
        Fault::InvalidOpcode { what }
    }

    /// #GP(0), the most common form.
    pub const GP0: Fault = Fault::GeneralProtection(0);

    /// Interrupt vector number.
    pub fn vector(&self) -> u8 {
        match self {
            Fault::DivideError => 0,
            Fault::Debug => 1,
            Fault::Breakpoint => 3,
            Fault::Overflow => 4,
            Fault::BoundRange => 5,
            Fault::InvalidOpcode { .. } => 6,
            Fault::DeviceNotAvailable => 7,
            Fault::DoubleFault => 8,
            Fault::InvalidTss(_) => 10,
            Fault::SegmentNotPresent(_) => 11,
            Fault::StackFault(_) => 12,
            Fault::GeneralProtection(_) => 13,
            Fault::PageFault { .. } => 14,
            Fault::X87Error => 16,
            Fault::AlignmentCheck => 17,
            Fault::SimdError => 19,
            Fault::SoftwareInterrupt(n) => *n,
            Fault::Int1 => 1,
        }
    }

    /// Error code pushed on delivery, if the vector has one.
    pub fn error_code(&self) -> Option<u32> {
        match *self {
            Fault::DoubleFault | Fault::AlignmentCheck => Some(0),
            Fault::InvalidTss(c)
            | Fault::SegmentNotPresent(c)
            | Fault::StackFault(c)
            | Fault::GeneralProtection(c) => Some(c as u32),
            Fault::PageFault { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Short mnemonic: `#GP`, `#PF`, …
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Fault::DivideError => "#DE",
            Fault::Debug => "#DB",
            Fault::Breakpoint => "#BP",
            Fault::Overflow => "#OF",
            Fault::BoundRange => "#BR",
            Fault::InvalidOpcode { .. } => "#UD",
            Fault::DeviceNotAvailable => "#NM",
            Fault::DoubleFault => "#DF",
            Fault::InvalidTss(_) => "#TS",
            Fault::SegmentNotPresent(_) => "#NP",
            Fault::StackFault(_) => "#SS",
            Fault::GeneralProtection(_) => "#GP",
            Fault::PageFault { .. } => "#PF",
            Fault::X87Error => "#MF",
            Fault::AlignmentCheck => "#AC",
            Fault::SimdError => "#XM",
            Fault::SoftwareInterrupt(_) => "INT",
            Fault::Int1 => "#DB",
        }
    }

    /// Traps (INT3, INTO, INT n, INT1) complete the instruction: RIP points after it.
    pub fn is_trap(&self) -> bool {
        matches!(
            self,
            Fault::Breakpoint | Fault::Overflow | Fault::SoftwareInterrupt(_) | Fault::Int1
        )
    }

    /// Exception class for the double-fault rules (SDM Vol. 3 table 6-5).
    pub fn class(&self) -> FaultClass {
        match self {
            Fault::DivideError
            | Fault::InvalidTss(_)
            | Fault::SegmentNotPresent(_)
            | Fault::StackFault(_)
            | Fault::GeneralProtection(_) => FaultClass::Contributory,
            Fault::PageFault { .. } => FaultClass::PageFault,
            Fault::DoubleFault => FaultClass::DoubleFault,
            _ => FaultClass::Benign,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::InvalidOpcode { what } => write!(f, "#UD ({what})"),
            Fault::PageFault { addr, code } => write!(f, "#PF(addr={addr:#x}, code={code:#x})"),
            Fault::SoftwareInterrupt(n) => write!(f, "INT {n:#04x}"),
            Fault::Int1 => f.write_str("#DB (INT1)"),
            other => match other.error_code() {
                Some(c) => write!(f, "{}({c:#x})", other.mnemonic()),
                None => f.write_str(other.mnemonic()),
            },
        }
    }
}

/// Classes of exceptions for the double-fault rules (SDM Vol. 3 table 6-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultClass {
    /// Everything else, including software and external interrupts.
    Benign,
    /// #DE, #TS, #NP, #SS, #GP.
    Contributory,
    /// #PF.
    PageFault,
    /// #DF itself (a fault while delivering it shuts the processor down).
    DoubleFault,
}

/// Page-fault error-code bits.
pub mod pf {
    pub const PRESENT: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const USER: u32 = 1 << 2;
    pub const RSVD: u32 = 1 << 3;
    pub const FETCH: u32 = 1 << 4;
}

/// Why an instruction handler stopped normal sequential execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trap {
    /// An architectural exception. For faults RIP is at the instruction; for traps after it.
    Fault(Fault),
    /// SYSCALL executed while the CPU is configured to hand system calls to the host
    /// (user-mode harness). RIP is after the instruction.
    Syscall,
    /// HLT executed. RIP is after the instruction.
    Halt,
    /// The instruction was not completed and must be re-executed (a REP string instruction
    /// interrupted by the budget). RIP is at the instruction; the iterations done are retired.
    Partial,
}

impl From<Fault> for Trap {
    fn from(f: Fault) -> Self {
        Trap::Fault(f)
    }
}
