#![no_main]
// Input handling: see kvaudit_fuzz::parquet_rows (fuzz/src/lib.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| kvaudit_fuzz::parquet_rows(data));
