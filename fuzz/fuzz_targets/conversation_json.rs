#![no_main]
// Input handling: see kvaudit_fuzz::conversation_json (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::conversation_json(data));
