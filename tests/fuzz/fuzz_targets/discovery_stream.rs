#![no_main]
libfuzzer_sys::fuzz_target!(
    init: {
        // libFuzzer's C `main` skips Rust's start-up, which sets SIGPIPE to ignored (as in meshd): without
        // this, a client write to a stream the server has already closed kills the fuzzer (exit 141).
        // SAFETY: called once, before any thread of the target exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    },
    |data: &[u8]| meshd_fuzz::discovery_stream(data)
);
