#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| paddock::fuzzing::state_records(data));
