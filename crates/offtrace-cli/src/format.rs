//! Human-readable numbers for the text report and the record summary line.

/// `1234567` → `"1,234,567"`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A counter value: whole numbers with thousands separators (`-956`, `247,896,352`), others
/// with three decimals (`0.725`), so integer counters (ns, bytes, events) do not read as
/// `247896352.000000`.
pub fn value(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}{}", count(v.abs() as u64))
    } else {
        format!("{v:.3}")
    }
}

/// Bytes in binary units: `"512 B"`, `"64.0 KiB"`, `"1.50 MiB"`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if v < 10.0 { format!("{v:.2} {}", UNITS[u]) } else { format!("{v:.1} {}", UNITS[u]) }
}

/// Nanoseconds with a unit that keeps 3–4 significant digits.
pub fn duration(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.2} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn formats() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(65536), "64.0 KiB");
        assert_eq!(bytes(1536 * 1024), "1.50 MiB");
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(12_345), "12.35 µs");
        assert_eq!(duration(2_500_000_000), "2.500 s");
        assert_eq!(value(247_896_352.0), "247,896,352");
        assert_eq!(value(-956.0), "-956");
        assert_eq!(value(0.725), "0.725");
        assert_eq!(value(f64::NAN), "NaN");
    }
}
