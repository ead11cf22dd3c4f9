#![no_main]
// Input handling: see kvaudit_fuzz::template_methods (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::template_methods(data));
