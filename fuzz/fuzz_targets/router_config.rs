#![no_main]
// Input handling: see kvaudit_fuzz::router_config (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::router_config(data));
