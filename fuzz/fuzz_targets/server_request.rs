#![no_main]
// Input handling: see kvaudit_fuzz::server_request (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::server_request(data));
