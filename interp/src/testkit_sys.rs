//! A bare system test machine for unit tests of the system-level CPU: physical RAM from 0, no
//! paging until the test enables it, a port bus with a serial sink and an exit port. Not the
//! real machine (that lives in the `lockstep` crate with its devices).

use crate::cpu::{Cpu, CpuConfig, Engine, Exit, ExitReason, Interpreter};
use crate::interrupt::{self, Event, Shutdown};
use crate::mem::{Bus, GuestRam};
use crate::state::{ctl, flags, sreg, CpuState, Segment};

/// Port whose OUT bytes are collected as serial output (COM1 data register).
pub const SERIAL_PORT: u16 = 0x3f8;
/// COM1 line status register: reads as "transmitter empty".
pub const SERIAL_LSR: u16 = 0x3fd;
/// QEMU's debug console port; bytes written go to the same sink.
pub const DEBUG_PORT: u16 = 0xe9;
/// isa-debug-exit: writing v ends the run with exit code (v << 1) | 1.
pub const EXIT_PORT: u16 = 0xf4;

/// Ports and MMIO for system tests: serial/debug output, an exit port, and a log of every
/// other access (so tests can check what a guest did on the bus).
#[derive(Default, Debug, Clone)]
pub struct PortBus {
    pub serial: Vec<u8>,
    pub exit_code: Option<u32>,
    /// (port, size, value) of OUTs to ports other than the ones above.
    pub outs: Vec<(u16, u8, u32)>,
    /// Value returned by INs from unknown ports (all ones by default, as on a PC).
    pub in_value: Option<u32>,
    /// (address, size, value) of MMIO writes.
    pub mmio_writes: Vec<(u64, u8, u64)>,
}

impl Bus for PortBus {
    fn mmio_read(&mut self, _addr: u64, size: u8) -> u64 {
        if size >= 8 {
            u64::MAX
        } else {
            (1u64 << (size as u32 * 8)) - 1
        }
    }
    fn mmio_write(&mut self, addr: u64, size: u8, value: u64) {
        if self.mmio_writes.len() < 1 << 16 {
            self.mmio_writes.push((addr, size, value));
        }
    }
    fn pio_in(&mut self, port: u16, size: u8) -> u32 {
        let ones = if size >= 4 {
            u32::MAX
        } else {
            (1u32 << (size as u32 * 8)) - 1
        };
        match port {
            SERIAL_LSR => 0x60,
            _ => self.in_value.unwrap_or(ones) & ones,
        }
    }
    fn pio_out(&mut self, port: u16, size: u8, value: u32) {
        match port {
            SERIAL_PORT | DEBUG_PORT => {
                if self.serial.len() < 1 << 20 {
                    self.serial.push(value as u8)
                }
            }
            EXIT_PORT => self.exit_code = Some((value << 1) | 1),
            _ => {
                if self.outs.len() < 1 << 16 {
                    self.outs.push((port, size, value))
                }
            }
        }
    }
}

/// A system test machine.
pub struct SysMachine {
    pub cpu: Cpu,
    pub ram: GuestRam,
    pub bus: PortBus,
    /// [`SysMachine::run_until_stop`] delivers exceptions through the IVT/IDT and goes on
    /// (default). When false it stops with [`SysStop::Exception`] instead.
    pub deliver_exceptions: bool,
}

/// How [`SysMachine::run_until_stop`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SysStop {
    /// The guest wrote the exit port.
    ExitPort(u32),
    /// HLT.
    Halt,
    /// An exception the engine handed back (with `deliver_exceptions` off).
    Exception(crate::Fault),
    /// The processor shut down (triple fault, or an event needing something not modelled).
    Shutdown(Box<Shutdown>),
    /// The instruction budget ran out.
    Budget,
    /// Any other engine exit.
    Other(ExitReason),
}

impl SysMachine {
    /// `ram_mb` MiB of RAM, CPU at the power-on state.
    pub fn new(ram_mb: u64) -> Self {
        let ram = GuestRam::new(ram_mb << 20).expect("map test RAM");
        let cpu = Cpu::new(CpuState::power_on(), CpuConfig::default(), [9; 32]);
        SysMachine {
            cpu,
            ram,
            bus: PortBus::default(),
            deliver_exceptions: true,
        }
    }

    /// Copy bytes to a physical address.
    pub fn load(&mut self, phys: u64, bytes: &[u8]) {
        self.ram.write_phys(phys, bytes).expect("load within RAM");
    }

    /// Real mode at `cs:ip` (CS base = cs << 4), other segments zero, as after a far jump
    /// from the reset vector.
    pub fn start_real(&mut self, cs: u16, ip: u16) {
        let mut st = CpuState::power_on();
        st.seg[sreg::CS] = Segment {
            selector: cs,
            attr: 0x009b,
            limit: 0xffff,
            base: (cs as u64) << 4,
        };
        st.rip = ip as u64;
        self.cpu.state = st;
        self.cpu.flush_caches();
    }

    /// 32-bit flat protected mode, paging off, CPL 0, at `eip`: the state a multiboot loader
    /// hands over (CS 0x10, data 0x18; GDTR is not valid until the guest loads its own).
    pub fn start_protected_flat(&mut self, eip: u32) {
        let mut st = CpuState::power_on();
        let code = Segment {
            selector: 0x10,
            attr: 0xc09b,
            limit: 0xffff_ffff,
            base: 0,
        };
        let data = Segment {
            selector: 0x18,
            attr: 0xc093,
            limit: 0xffff_ffff,
            base: 0,
        };
        st.seg = [data; 6];
        st.seg[sreg::CS] = code;
        st.cr0 = ctl::CR0_PE | ctl::CR0_ET;
        st.rflags = flags::FIXED1;
        st.rip = eip as u64;
        self.cpu.state = st;
        self.cpu.flush_caches();
    }

    /// 64-bit long mode at CPL 0 with paging through `cr3` (the caller builds the tables).
    pub fn start_long(&mut self, cr3: u64, rip: u64) {
        let mut st = CpuState::long_mode_flat(cr3, 0);
        st.rflags = flags::FIXED1;
        st.rip = rip;
        self.cpu.state = st;
        self.cpu.flush_caches();
    }

    /// Run the interpreter for at most `budget` instructions (one engine call).
    pub fn run(&mut self, budget: u64) -> Exit {
        self.run_with(&mut Interpreter, budget)
    }

    /// One engine call, then the interrupt-shadow rule
    /// ([`interrupt::end_shadow_after_run`]).
    pub fn run_with(&mut self, engine: &mut dyn Engine, budget: u64) -> Exit {
        let shadow = self.cpu.state.interrupt_shadow;
        let e = engine.run(&mut self.cpu, &mut self.ram, &mut self.bus, budget);
        interrupt::end_shadow_after_run(&mut self.cpu.state, shadow, e.retired);
        e
    }

    /// Deliver an event now (exception, software or external interrupt).
    pub fn deliver(&mut self, ev: Event) -> Result<(), Box<Shutdown>> {
        interrupt::deliver(&mut self.cpu, &mut self.ram, &mut self.bus, ev)
    }

    /// Offer external interrupt `vector` at this boundary: delivered (true) when IF = 1 and no
    /// interrupt shadow is in force, else refused (false, nothing changes). A halted CPU
    /// wakes up. Delivery can still shut the processor down.
    pub fn inject_external(&mut self, vector: u8) -> Result<bool, Box<Shutdown>> {
        if !interrupt::accepts_external(&self.cpu.state) {
            return Ok(false);
        }
        self.deliver(Event::External(vector))?;
        Ok(true)
    }

    /// Run `engine` until the exit port is written, HLT, a shutdown, an exception (only with
    /// `deliver_exceptions` off: otherwise exceptions are delivered and the run goes on), or
    /// `budget` instructions have retired.
    pub fn run_until_stop(&mut self, engine: &mut dyn Engine, budget: u64) -> SysStop {
        let end = self.cpu.retired.saturating_add(budget);
        loop {
            if let Some(c) = self.bus.exit_code {
                return SysStop::ExitPort(c);
            }
            if self.cpu.retired >= end {
                return SysStop::Budget;
            }
            let left = end - self.cpu.retired;
            let e = self.run_with(engine, left);
            match e.reason {
                ExitReason::Budget | ExitReason::Yield => {}
                ExitReason::Halt => {
                    return match self.bus.exit_code {
                        Some(c) => SysStop::ExitPort(c),
                        None => SysStop::Halt,
                    }
                }
                ExitReason::Exception(f) if self.deliver_exceptions => {
                    if let Err(s) = self.deliver(Event::from_fault(f)) {
                        return SysStop::Shutdown(s);
                    }
                }
                ExitReason::Exception(f) => return SysStop::Exception(f),
                other => return SysStop::Other(other),
            }
        }
    }

    /// Serial output so far, lossily as text.
    pub fn serial_text(&self) -> String {
        String::from_utf8_lossy(&self.bus.serial).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Bus;

    #[test]
    fn port_bus_collects_serial_and_exit() {
        let mut b = PortBus::default();
        b.pio_out(SERIAL_PORT, 1, b'o' as u32);
        b.pio_out(DEBUG_PORT, 1, b'k' as u32);
        b.pio_out(0x80, 1, 0x55);
        assert_eq!(b.pio_in(SERIAL_LSR, 1), 0x60);
        assert_eq!(b.pio_in(0x1234, 2), 0xffff);
        b.pio_out(EXIT_PORT, 1, 3);
        assert_eq!(b.serial, b"ok");
        assert_eq!(b.exit_code, Some(7));
        assert_eq!(b.outs, vec![(0x80, 1, 0x55)]);
    }

    #[test]
    fn real_mode_code_runs_from_cs_ip() {
        let mut m = SysMachine::new(2);
        // mov ax, 0x1234 ; add ax, 1 ; hlt  at 0x1000:0x0010 (physical 0x10010)
        m.load(0x10010, &[0xb8, 0x34, 0x12, 0x05, 0x01, 0x00, 0xf4]);
        m.start_real(0x1000, 0x10);
        let e = m.run(10);
        assert_eq!(e.retired, 3);
        assert_eq!(e.reason, ExitReason::Halt);
        assert_eq!(m.cpu.state.gpr[0] & 0xffff, 0x1235);
        assert_eq!(m.cpu.state.rip, 0x17);
    }
}
