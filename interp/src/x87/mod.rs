//! Soft-float x87 arithmetic in true 80-bit extended precision: encodings and rounding
//! ([`float`]), basic arithmetic ([`arith`]), conversions ([`convert`]), the other x87
//! numeric operations ([`misc`]) and transcendentals ([`trans`]). Never uses host floating point.

pub mod arith;
pub mod convert;
pub mod fast;
pub mod float;
pub mod misc;
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) mod native_tests;
pub mod trans;

pub use float::{sw, Class, Env, F80};
