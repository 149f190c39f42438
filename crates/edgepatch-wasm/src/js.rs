//! Conversions between JS values and the core's types that the bindings share: numbers,
//! hex, plain objects, errors.

use std::io;

#[cfg(feature = "diff")]
use js_sys::Uint8Array;
use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Largest integer a JS number holds exactly.
pub(crate) const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// The message of a thrown JS value (an `Error`'s message, or the value as a string).
pub(crate) fn js_message(v: &JsValue) -> String {
    if let Some(e) = v.dyn_ref::<js_sys::Error>() {
        return String::from(e.message());
    }
    v.as_string().unwrap_or_else(|| format!("{v:?}"))
}

pub(crate) fn js_io(v: JsValue) -> io::Error {
    io::Error::other(js_message(&v))
}

pub(crate) fn check_methods(obj: &JsValue, what: &str, methods: &[&str]) -> Result<(), JsError> {
    let missing: Vec<&str> = methods.iter().copied().filter(|m| !has_method(obj, m)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(JsError::new(&format!("{what} has no method {}", missing.join(", "))))
    }
}

pub(crate) fn has_method(obj: &JsValue, name: &str) -> bool {
    obj.is_object() && Reflect::get(obj, &JsValue::from_str(name)).map(|f| f.is_function()).unwrap_or(false)
}

pub(crate) fn object(fields: &[(&str, u64)]) -> Object {
    let o = Object::new();
    for (k, v) in fields {
        Reflect::set(&o, &JsValue::from_str(k), &JsValue::from_f64(*v as f64)).expect("set on a plain object");
    }
    o
}

pub(crate) fn set(o: &Object, k: &str, v: impl Into<JsValue>) {
    Reflect::set(o, &JsValue::from_str(k), &v.into()).expect("set on a plain object");
}

pub(crate) fn hex(bytes: &[u8; 32]) -> String {
    edgepatch_core::blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

pub(crate) fn js_u64(what: &str, n: f64) -> Result<u64, JsError> {
    if (0.0..=MAX_SAFE).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(JsError::new(&format!("{what} is not a whole number from 0 to 2^53")))
    }
}

pub(crate) fn core_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// A view of `buf` for JS to read or fill in place.
///
/// It aliases `buf` without a borrow (the methods that hand one out say so): it
/// is valid until `buf` is resized or dropped or the memory grows. A growth
/// detaches it (`byteLength` 0), so JS sees a stale view rather than writing
/// through it; the generator resizes its buffers only in the methods that
/// return a fresh view, or in `encodeFilledSegment`/`finish`.
#[cfg(feature = "diff")]
pub(crate) fn view_of(buf: &mut [u8]) -> Uint8Array {
    unsafe { Uint8Array::view_mut_raw(buf.as_mut_ptr(), buf.len()) }
}
