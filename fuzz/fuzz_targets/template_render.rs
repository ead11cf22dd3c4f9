#![no_main]
// Input handling: see kvaudit_fuzz::template_render (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::template_render(data));
