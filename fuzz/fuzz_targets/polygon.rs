//! cargo-fuzz target: see `tests/fuzz_harness/mod.rs` for what it checks.
#![no_main]

#[path = "../../tests/fuzz_harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = harness::polygon(data);
});
