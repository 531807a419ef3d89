//! Guest console input as a timed byte script: (virtual time, bytes) events that the machine offers to the UART at exact instruction boundaries, byte by byte as the receive FIFO has room, and the text format `--record-input` writes and `--replay-input` reads.
//!
//! Virtual time here is in instructions: retired instructions plus the instructions' worth of
//! time skipped while halted ([`super::Machine::vtime`]). An event *arrives* at its time: its
//! bytes join a queue, and the queue moves into the receive FIFO only while the UART accepts
//! input ([`Uart::accepts_input`]: room in the FIFO, RTS asserted, not in loopback). Bytes that
//! do not fit wait for the guest to read (a port access, which ends the engine run), so scripted
//! input is never lost and lands at the same instruction boundary on every run.
//!
//! ## Recording format (text, UTF-8)
//!
//! ```text
//! # lockstep input recording v1
//! 0 "root\n"
//! 41250000 "ls -l\n\x03"
//! end 97000000
//! ```
//!
//! One event per line: the virtual time (decimal instructions) of its arrival, a space, and the
//! bytes as a double-quoted string with escapes `\n \r \t \0 \e \\ \" \xHH` (every other byte
//! outside printable ASCII is written as `\xHH`). Times never decrease. `end T` (optional, last)
//! says the recorded run was interrupted at the first instruction boundary at virtual time T;
//! a replay stops there too. Blank lines and lines starting with `#` are ignored.

use crate::devices::uart16550::Uart;
use std::collections::VecDeque;
use std::fmt::Write as _;

/// Bytes that arrive at one virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputEvent {
    /// Virtual time in instructions.
    pub at: u64,
    pub bytes: Vec<u8>,
}

/// A parsed script: events in time order and an optional end time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputScript {
    pub events: Vec<InputEvent>,
    pub end: Option<u64>,
}

/// Decode `\n`-style escapes (as in the recording format, without the quotes).
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1).ok_or("a lone backslash at the end")?;
        i += 2;
        out.push(match c {
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'0' => 0,
            b'e' => 0x1b,
            b'\\' => b'\\',
            b'"' => b'"',
            b'x' => {
                let h = s
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("\\x needs two hex digits")?;
                i += 2;
                h
            }
            other => return Err(format!("unknown escape \\{}", other as char)),
        });
    }
    Ok(out)
}

/// Encode bytes as the body of a quoted string in the recording format.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &c in bytes {
        match c {
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s
}

/// One recording line for an event.
pub fn format_event(e: &InputEvent) -> String {
    format!("{} \"{}\"\n", e.at, escape(&e.bytes))
}

/// The header line of a recording.
pub const HEADER: &str = "# lockstep input recording v1 (virtual time in instructions, bytes)\n";

impl InputScript {
    /// Parse the recording format.
    pub fn parse(text: &str) -> Result<InputScript, String> {
        let mut sc = InputScript::default();
        let mut last = 0u64;
        for (n, line) in text.lines().enumerate() {
            let err = |m: &str| format!("line {}: {m}", n + 1);
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if sc.end.is_some() {
                return Err(err("nothing may follow the `end` line"));
            }
            let (t, rest) = line.split_once(' ').unwrap_or((line, ""));
            if t == "end" {
                let e: u64 = rest.trim().parse().map_err(|_| err("bad end time"))?;
                if e < last {
                    return Err(err("end time before the last event"));
                }
                sc.end = Some(e);
                continue;
            }
            let at: u64 = t.parse().map_err(|_| err("expected a decimal time"))?;
            if at < last {
                return Err(err("times must not decrease"));
            }
            let body = rest
                .trim()
                .strip_prefix('"')
                .and_then(|r| r.strip_suffix('"'))
                .ok_or_else(|| err("expected the bytes as a \"quoted string\""))?;
            let bytes = unescape(body).map_err(|m| err(&m))?;
            last = at;
            if !bytes.is_empty() {
                sc.events.push(InputEvent { at, bytes });
            }
        }
        Ok(sc)
    }

    /// The recording text for these events.
    pub fn format(&self) -> String {
        let mut s = String::from(HEADER);
        for e in &self.events {
            s.push_str(&format_event(e));
        }
        if let Some(e) = self.end {
            let _ = writeln!(s, "end {e}");
        }
        s
    }
}

/// Offers scripted and live input to the UART.
#[derive(Clone, Debug, Default)]
pub struct InputFeeder {
    /// Events that have not arrived yet, in time order.
    future: VecDeque<InputEvent>,
    /// Arrived bytes waiting for room in the receive FIFO.
    waiting: VecDeque<u8>,
    /// Stop at the first instruction boundary at this virtual time (a replayed `end`).
    pub end: Option<u64>,
    /// Every event as it arrived (for `--record-input`), until taken; kept only while
    /// `recording` is set, so unrecorded runs do not accumulate their input.
    log: Vec<InputEvent>,
    pub recording: bool,
    /// Bytes moved into the FIFO so far.
    pub delivered: u64,
}

impl InputFeeder {
    pub fn new(script: InputScript) -> Self {
        InputFeeder {
            future: script.events.into(),
            end: script.end,
            ..Self::default()
        }
    }

    /// Add bytes arriving at virtual time `at` (live input, or one more scripted source). An
    /// event earlier than a queued one is kept in time order after the events at its time.
    pub fn offer(&mut self, at: u64, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        let pos = self.future.partition_point(|e| e.at <= at);
        self.future.insert(pos, InputEvent { at, bytes });
    }

    /// Virtual time of the next event still to arrive.
    pub fn next_arrival(&self) -> Option<u64> {
        self.future.front().map(|e| e.at)
    }

    /// Arrived bytes not yet in the FIFO, plus bytes still to arrive.
    pub fn backlog(&self) -> usize {
        self.waiting.len() + self.future.iter().map(|e| e.bytes.len()).sum::<usize>()
    }

    /// At virtual time `now`: let every due event arrive, then move waiting bytes into the
    /// UART while it accepts them. Returns the number of bytes moved.
    pub fn feed(&mut self, now: u64, uart: &mut Uart) -> usize {
        while self.future.front().is_some_and(|e| e.at <= now) {
            if let Some(e) = self.future.pop_front() {
                self.waiting.extend(e.bytes.iter().copied());
                if self.recording {
                    self.log.push(InputEvent {
                        at: now,
                        bytes: e.bytes,
                    });
                }
            }
        }
        let mut n = 0;
        while !self.waiting.is_empty() && uart.accepts_input() {
            if let Some(b) = self.waiting.pop_front() {
                uart.push_rx(b);
                n += 1;
            }
        }
        self.delivered += n as u64;
        n
    }

    /// Events that arrived since the last call (what `--record-input` writes).
    pub fn take_log(&mut self) -> Vec<InputEvent> {
        std::mem::take(&mut self.log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::PioDevice;

    fn rd(u: &mut Uart, r: u16) -> u8 {
        u.pio_read(r, 1, 0) as u8
    }
    fn wr(u: &mut Uart, r: u16, v: u8) {
        u.pio_write(r, 1, v as u32, 0)
    }

    #[test]
    fn escapes_round_trip() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&escape(&all)).unwrap(), all);
        assert_eq!(unescape(r"a\nb\x41\e\\").unwrap(), b"a\nbA\x1b\\");
        assert!(unescape(r"\q").is_err());
        assert!(unescape(r"\x4").is_err());
        assert!(unescape("\\").is_err());
    }

    #[test]
    fn script_parse_and_format() {
        let text = "# c\n\n0 \"ab\\n\"\n5 \"\\x03\"\n5 \"x y\"\nend 9\n";
        let s = InputScript::parse(text).unwrap();
        assert_eq!(s.events.len(), 3);
        assert_eq!(s.events[0].bytes, b"ab\n");
        assert_eq!(s.events[2].bytes, b"x y");
        assert_eq!(s.end, Some(9));
        assert_eq!(InputScript::parse(&s.format()).unwrap(), s);
        assert!(
            InputScript::parse("5 \"a\"\n4 \"b\"\n").is_err(),
            "decreasing"
        );
        assert!(InputScript::parse("5 a\n").is_err(), "unquoted");
        assert!(InputScript::parse("end 3\n4 \"b\"\n").is_err(), "after end");
        assert!(InputScript::parse("x \"b\"\n").is_err());
    }

    /// A UART as a driver leaves it: FIFO on, RTS asserted.
    fn ready_uart(fcr: u8) -> Uart {
        let mut u = Uart::new();
        wr(&mut u, 2, fcr);
        wr(&mut u, 4, 0x0b);
        u
    }

    #[test]
    fn feeder_waits_for_room_and_loses_nothing() {
        let mut u = ready_uart(0x01);
        let mut f = InputFeeder::new(InputScript {
            events: vec![InputEvent {
                at: 10,
                bytes: (0..40).collect(),
            }],
            end: None,
        });
        f.recording = true;
        assert_eq!(f.feed(9, &mut u), 0, "not arrived yet");
        assert_eq!(f.next_arrival(), Some(10));
        assert_eq!(f.feed(10, &mut u), 16, "FIFO full");
        assert_eq!(f.backlog(), 24);
        assert_eq!(f.feed(11, &mut u), 0);
        let mut got = Vec::new();
        for t in 12..100 {
            while rd(&mut u, 5) & 1 != 0 {
                got.push(rd(&mut u, 0));
            }
            f.feed(t, &mut u);
        }
        assert_eq!(got, (0..40).collect::<Vec<u8>>());
        assert_eq!(rd(&mut u, 5) & 2, 0, "no overrun");
        assert_eq!(f.delivered, 40);
        let log = f.take_log();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].at, 10);
        assert!(f.take_log().is_empty());
    }

    #[test]
    fn feeder_respects_rts_loopback_and_fifo_off() {
        let mut u = Uart::new();
        let mut f = InputFeeder::default();
        f.offer(0, b"hey".to_vec());
        assert_eq!(
            f.feed(0, &mut u),
            0,
            "RTS not asserted: the terminal holds input"
        );
        wr(&mut u, 4, 0x1b); // loopback + RTS
        assert_eq!(
            f.feed(1, &mut u),
            0,
            "loopback: the receiver is disconnected"
        );
        wr(&mut u, 4, 0x03);
        assert_eq!(f.feed(2, &mut u), 1, "FIFO off: one byte holding register");
        assert_eq!(rd(&mut u, 0), b'h');
        assert_eq!(f.feed(3, &mut u), 1);
        assert_eq!(rd(&mut u, 0), b'e');
        assert_eq!(f.feed(3, &mut u), 1);
        assert_eq!(rd(&mut u, 0), b'y');
        assert_eq!(f.backlog(), 0);
    }

    #[test]
    fn offers_keep_time_order() {
        let mut f = InputFeeder {
            recording: true,
            ..InputFeeder::default()
        };
        f.offer(5, b"b".to_vec());
        f.offer(1, b"a".to_vec());
        f.offer(5, b"c".to_vec());
        f.offer(7, Vec::new());
        let mut u = ready_uart(0x01);
        f.feed(100, &mut u);
        assert_eq!(
            [rd(&mut u, 0), rd(&mut u, 0), rd(&mut u, 0)],
            [b'a', b'b', b'c']
        );
        let log = f.take_log();
        assert_eq!(log.len(), 3, "empty offers are dropped");
        assert!(log.iter().all(|e| e.at == 100), "logged at arrival time");
    }
}
