//! Arbitrary bytes as a whole trace file: the reader must return records or errors, never
//! panic, never allocate without bound. Seeded from the fixtures (see `seed.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use offtrace_format::TraceReader;

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = TraceReader::new(data) {
        // The iterator ends after the first error; bound it anyway so a bug shows as a
        // failure rather than a hang.
        for item in reader.take(1 << 20) {
            if item.is_err() {
                break;
            }
        }
    }
});
