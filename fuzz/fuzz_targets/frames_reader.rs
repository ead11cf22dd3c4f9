#![no_main]
// Input handling: see kvaudit_fuzz::frames_reader (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::frames_reader(data));
