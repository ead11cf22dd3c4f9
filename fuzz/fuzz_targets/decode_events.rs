#![no_main]
// Input handling: see kvaudit_fuzz::decode_events (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::decode_events(data));
