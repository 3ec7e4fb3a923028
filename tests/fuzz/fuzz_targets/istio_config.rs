#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| meshd_fuzz::istio_config(data));
