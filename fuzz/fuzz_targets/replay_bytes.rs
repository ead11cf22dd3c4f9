#![no_main]
// Input handling: see kvaudit_fuzz::replay_bytes (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::replay_bytes(data));
