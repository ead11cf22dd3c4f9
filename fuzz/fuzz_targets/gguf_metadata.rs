#![no_main]
// Input handling: see kvaudit_fuzz::gguf_metadata (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::gguf_metadata(data));
