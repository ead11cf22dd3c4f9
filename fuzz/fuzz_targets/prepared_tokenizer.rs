#![no_main]
// Input handling: see kvaudit_fuzz::prepared_tokenizer (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::prepared_tokenizer(data));
