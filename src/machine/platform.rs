//! The PC platform as the CPU sees it: the port and MMIO maps routing every access to its device, interrupt routing (ISA lines → 8259 pair and I/O APIC → local APIC), and the machine's view of timers and requests.

use crate::boot::acpi;
use crate::devices::acpi_pm::AcpiPm;
use crate::devices::i8042::I8042;
use crate::devices::ioapic::IoApic;
use crate::devices::lapic::Lapic;
use crate::devices::misc::{DebugExit, FwCfg, PostCode, ResetControl};
use crate::devices::pic8259::Pic;
use crate::devices::pit8254::Pit;
use crate::devices::rtc_cmos::{Rtc, RtcConfig};
use crate::devices::uart16550::Uart;
use crate::devices::{IrqSink, MmioDevice, PioDevice};
use lockstep_interp::Bus;

/// COM1.
pub const UART_BASE: u16 = 0x3f8;
pub const UART_IRQ: u8 = 4;
pub const RTC_IRQ: u8 = 8;
pub const LAPIC_MMIO: u64 = acpi::LAPIC_BASE as u64;
pub const IOAPIC_MMIO: u64 = acpi::IOAPIC_BASE as u64;
const APIC_BASE_MSR: u32 = 0x1b;
const TSC_DEADLINE_MSR: u32 = 0x6e0;
/// Virtual TSC frequency (1 instruction = 1 ns by default: 1 GHz).
pub const TSC_HZ: u64 = 1_000_000_000;

/// What the platform asks of the machine after a device access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    PowerOff,
    Reset,
    Exit(u32),
}

/// Both interrupt controllers behind one ISA line: the 8259 pair sees ISA IRQ n, the I/O APIC
/// pin n, except IRQ0, which the MADT overrides to GSI 2.
struct IsaSink<'a> {
    pic: &'a mut Pic,
    ioapic: &'a mut IoApic,
}

impl IrqSink for IsaSink<'_> {
    fn set_irq(&mut self, line: u8, level: bool) {
        self.pic.set_irq(line, level);
        let gsi = if line == 0 { 2 } else { line };
        self.ioapic.set_irq(gsi, level);
    }
}

/// Every device of a single-vCPU PC.
pub struct Platform {
    /// Virtual nanoseconds per retired instruction.
    pub ns_per_insn: u64,
    /// Instructions' worth of virtual time skipped while halted (virtual time = retired +
    /// idle, in instructions).
    pub idle_insns: u64,
    now: u64,
    pub uart: Uart,
    pub pic: Pic,
    pub pit: Pit,
    pub rtc: Rtc,
    pub i8042: I8042,
    pub post: PostCode,
    pub exit: DebugExit,
    pub reset: ResetControl,
    pub fw_cfg: FwCfg,
    pub pm: AcpiPm,
    pub lapic: Lapic,
    pub ioapic: IoApic,
    /// Accesses to ports and addresses with nothing behind them (reads give all ones).
    pub unclaimed: u64,
}

impl Platform {
    pub fn new(ram_bytes: u64, epoch: i64, ns_per_insn: u64) -> Self {
        Platform {
            ns_per_insn: ns_per_insn.max(1),
            idle_insns: 0,
            now: 0,
            uart: Uart::new(),
            pic: Pic::new(),
            pit: Pit::new(),
            rtc: Rtc::new(RtcConfig {
                epoch,
                ram_below_4g: ram_bytes.min(0xe000_0000),
                ram_above_4g: ram_bytes.saturating_sub(0xe000_0000),
                cpus: 1,
            }),
            i8042: I8042::new(),
            post: PostCode::default(),
            exit: DebugExit::default(),
            reset: ResetControl::default(),
            fw_cfg: FwCfg::new(ram_bytes, 1),
            pm: AcpiPm::new(),
            lapic: Lapic::new(0, true, TSC_HZ),
            ioapic: IoApic::new(1),
            unclaimed: 0,
        }
    }

    /// Virtual time in ns for `retired` instructions (plus the idle skips).
    pub fn ns_at(&self, retired: u64) -> u64 {
        retired
            .saturating_add(self.idle_insns)
            .saturating_mul(self.ns_per_insn)
    }

    /// Current virtual time in ns (as of the last `set_now`/`advance`).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Bring every timer up to `retired` and route the interrupt lines.
    pub fn advance(&mut self, retired: u64) {
        self.now = self.ns_at(retired);
        let now = self.now;
        self.pit.advance(now);
        self.rtc.advance(now);
        self.pm.advance(now);
        self.lapic.advance(now);
        self.route();
    }

    /// The earliest virtual-ns deadline at which a device will change an interrupt line.
    pub fn next_event(&self) -> Option<u64> {
        [
            self.pit.next_event(),
            self.rtc.next_event(),
            self.pm.next_event(),
            self.lapic.next_event(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Forward line changes to the controllers, I/O APIC messages to the local APIC, and
    /// local-APIC EOIs of level-triggered vectors back to the I/O APIC.
    pub fn route(&mut self) {
        let mut sink = IsaSink {
            pic: &mut self.pic,
            ioapic: &mut self.ioapic,
        };
        self.pit.irq.forward(0, &mut sink);
        self.i8042.irq_kbd.forward(1, &mut sink);
        self.uart.irq.forward(UART_IRQ, &mut sink);
        self.rtc.irq.forward(RTC_IRQ, &mut sink);
        self.pm.sci.forward(acpi::SCI_IRQ as u8, &mut sink);
        self.i8042.irq_aux.forward(12, &mut sink);
        for m in self.ioapic.take_messages() {
            // Single vCPU: every fixed/lowest-priority message reaches APIC 0. ExtINT messages
            // mean "ask the 8259", which the LINT0 path already does.
            if matches!(m.delivery_mode, 0 | 1) {
                self.lapic.accept(m.vector, m.level);
            }
        }
        while let Some(v) = self.lapic.take_eoi_broadcast() {
            self.ioapic.eoi(v);
        }
    }

    /// The vector the CPU would take now (IF permitting), without acknowledging it.
    pub fn pending_interrupt(&self) -> Option<u8> {
        if let Some(v) = self.lapic.pending_vector() {
            return Some(v);
        }
        if self.lapic.accepts_pic_intr() && self.pic.intr() {
            return self.pic.pending_vector();
        }
        None
    }

    /// INTA: acknowledge the pending interrupt and return its vector.
    pub fn acknowledge_interrupt(&mut self) -> Option<u8> {
        let v = if self.lapic.pending_vector().is_some() {
            Some(self.lapic.ack())
        } else if self.lapic.accepts_pic_intr() && self.pic.intr() {
            Some(self.pic.acknowledge())
        } else {
            None
        };
        self.route();
        v
    }

    /// A request the guest made through a device (exit port, ACPI S5, reset), if any.
    pub fn take_request(&mut self) -> Option<Request> {
        if let Some(c) = self.exit.take_exit() {
            return Some(Request::Exit(c));
        }
        if self.pm.power_off_requested {
            self.pm.power_off_requested = false;
            return Some(Request::PowerOff);
        }
        if self.i8042.take_reset_request() || self.reset.take_reset_request() {
            return Some(Request::Reset);
        }
        None
    }
}

fn ones(size: u8) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size as u32 * 8)) - 1
    }
}

impl Bus for Platform {
    fn set_now(&mut self, retired: u64) {
        self.now = self.ns_at(retired);
    }

    fn pio_in(&mut self, port: u16, size: u8) -> u32 {
        let now = self.now;
        let v = match port {
            0x3f8..=0x3ff => self.uart.pio_read(port - UART_BASE, size, now),
            0x20 | 0x21 | 0xa0 | 0xa1 | 0x4d0 | 0x4d1 => self.pic.pio_read(port, size, now),
            0x40..=0x43 => self.pit.pio_read(port - 0x40, size, now),
            0x61 => self.pit.pio_read(0x21, size, now),
            0x60 | 0x64 => self.i8042.pio_read(port - 0x60, size, now),
            0x70 | 0x71 => self.rtc.pio_read(port - 0x70, size, now),
            0x80 => self.post.pio_read(0, size, now),
            0xf4 => self.exit.pio_read(0, size, now),
            0xcf9 => self.reset.pio_read(0, size, now),
            0x510 | 0x511 => self.fw_cfg.pio_read(port - 0x510, size, now),
            p if (acpi::PM_BASE..acpi::PM_BASE + 12).contains(&p) => {
                self.pm.pio_read(p - acpi::PM_BASE, size, now)
            }
            _ => {
                self.unclaimed += 1;
                ones(size) as u32
            }
        };
        self.route();
        v
    }

    fn pio_out(&mut self, port: u16, size: u8, value: u32) {
        let now = self.now;
        match port {
            0x3f8..=0x3ff => self.uart.pio_write(port - UART_BASE, size, value, now),
            0x20 | 0x21 | 0xa0 | 0xa1 | 0x4d0 | 0x4d1 => self.pic.pio_write(port, size, value, now),
            0x40..=0x43 => self.pit.pio_write(port - 0x40, size, value, now),
            0x61 => self.pit.pio_write(0x21, size, value, now),
            0x60 | 0x64 => self.i8042.pio_write(port - 0x60, size, value, now),
            0x70 | 0x71 => self.rtc.pio_write(port - 0x70, size, value, now),
            0x80 => self.post.pio_write(0, size, value, now),
            0xf4 => self.exit.pio_write(0, size, value, now),
            0xcf9 => self.reset.pio_write(0, size, value, now),
            0x510 | 0x511 => self.fw_cfg.pio_write(port - 0x510, size, value, now),
            p if (acpi::PM_BASE..acpi::PM_BASE + 12).contains(&p) => {
                self.pm.pio_write(p - acpi::PM_BASE, size, value, now)
            }
            _ => self.unclaimed += 1,
        }
        self.route();
    }

    fn mmio_read(&mut self, addr: u64, size: u8) -> u64 {
        let now = self.now;
        let v = if (LAPIC_MMIO..LAPIC_MMIO + 0x1000).contains(&addr) {
            self.lapic.mmio_read(addr - LAPIC_MMIO, size, now)
        } else if (IOAPIC_MMIO..IOAPIC_MMIO + 0x1000).contains(&addr) {
            self.ioapic.mmio_read(addr - IOAPIC_MMIO, size, now)
        } else {
            self.unclaimed += 1;
            ones(size)
        };
        self.route();
        v
    }

    fn mmio_write(&mut self, addr: u64, size: u8, value: u64) {
        let now = self.now;
        if (LAPIC_MMIO..LAPIC_MMIO + 0x1000).contains(&addr) {
            self.lapic.mmio_write(addr - LAPIC_MMIO, size, value, now);
        } else if (IOAPIC_MMIO..IOAPIC_MMIO + 0x1000).contains(&addr) {
            self.ioapic.mmio_write(addr - IOAPIC_MMIO, size, value, now);
        } else {
            self.unclaimed += 1;
        }
        self.route();
    }

    /// The CPU hands over IA32_TSC_DEADLINE in retired-instruction units (TSC minus its
    /// offset); the local APIC keeps deadlines in its own TSC-tick domain, which at
    /// [`TSC_HZ`] = 1 GHz is virtual nanoseconds.
    fn msr_read(&mut self, msr: u32) -> Option<u64> {
        let now = self.now;
        match msr {
            TSC_DEADLINE_MSR => {
                let d = self.lapic.tsc_deadline();
                Some(if d == 0 {
                    0
                } else {
                    (d / self.ns_per_insn)
                        .saturating_sub(self.idle_insns)
                        .max(1)
                })
            }
            _ => self.lapic.msr_read(msr, now),
        }
    }

    fn msr_write(&mut self, msr: u32, value: u64) -> bool {
        let now = self.now;
        let r = match msr {
            APIC_BASE_MSR => {
                self.lapic.set_apic_base_msr(value);
                true
            }
            TSC_DEADLINE_MSR => {
                let ns = if value == 0 {
                    0
                } else {
                    self.ns_at(value).max(1)
                };
                self.lapic.set_tsc_deadline(ns, now);
                true
            }
            _ => self.lapic.msr_write(msr, value, now),
        };
        self.route();
        r
    }
}
