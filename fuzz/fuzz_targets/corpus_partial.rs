#![no_main]
// Input handling: see kvaudit_fuzz::corpus_partial (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::corpus_partial(data));
