#![no_main]
// Input handling: see kvaudit_fuzz::http_follower (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::http_follower(data));
