#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gitfleet_testkit::fuzzing::approval(data));
