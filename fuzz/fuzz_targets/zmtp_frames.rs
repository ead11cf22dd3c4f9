#![no_main]
// Input handling: see kvaudit_fuzz::zmtp_frames (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::zmtp_frames(data));
