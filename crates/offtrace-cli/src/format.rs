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

/// A counter value: whole numbers with thousands separators (`-956`, `247,896,352`), others with
/// separators too and three decimals below 1,000 (`0.725`, `-210.333`), one above
/// (`112,117,666.2`): a column of one counter (min, mean, max, last) then reads in one style,
/// where a mean of whole samples used to read `112117666.227` beside `217,204,881`.
pub fn value(v: f64) -> String {
    if !v.is_finite() || v.abs() >= 1e15 {
        return format!("{v:.3}");
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let a = v.abs();
    if a.fract() == 0.0 {
        return format!("{sign}{}", count(a as u64));
    }
    let decimals = if a < 1_000.0 { 3 } else { 1 };
    let text = format!("{a:.decimals$}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let int = int.parse::<u64>().map_or_else(|_| int.to_owned(), count);
    // Rounding can leave only zeros (-0.0004 → "0.000"): no sign then.
    let sign = if text.bytes().all(|b| b == b'0' || b == b'.') { "" } else { sign };
    format!("{sign}{int}.{frac}")
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

/// A rate given in bytes per nanosecond (= GB/s): `6.41 GB/s` as before from 1 GB/s up, below
/// that in MB/s or kB/s with three significant digits (`7.52 MB/s`, `312 kB/s`; decimal units,
/// as rates are quoted), where small copies read `0.01 GB/s`, which says little.
pub fn bandwidth(gb_s: f64) -> String {
    let three = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    };
    if !gb_s.is_finite() || gb_s >= 1.0 {
        format!("{gb_s:.2} GB/s")
    } else if gb_s >= 1e-3 {
        format!("{} MB/s", three(gb_s * 1e3))
    } else {
        format!("{} kB/s", three(gb_s * 1e6))
    }
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

    #[test]
    fn small_rates_get_a_unit_that_shows_them() {
        assert_eq!(bandwidth(15.027_799), "15.03 GB/s");
        assert_eq!(bandwidth(1.0), "1.00 GB/s");
        assert_eq!(bandwidth(0.007_49), "7.49 MB/s");
        assert_eq!(bandwidth(0.314_2), "314 MB/s");
        assert_eq!(bandwidth(0.000_312_4), "312 kB/s");
        assert_eq!(bandwidth(0.000_000_5), "0.50 kB/s");
    }

    #[test]
    fn fractional_counter_values_are_grouped_like_whole_ones() {
        assert_eq!(value(112_117_666.227), "112,117,666.2");
        assert_eq!(value(2_001_799.674), "2,001,799.7");
        assert_eq!(value(-247_897_599.667), "-247,897,599.7");
        assert_eq!(value(295.333_333), "295.333");
        assert_eq!(value(-210.333), "-210.333");
        assert_eq!(value(999.9996), "1,000.000");
        assert_eq!(value(-0.0004), "0.000");
        assert_eq!(value(1e16 + 0.5), "10000000000000000.000");
    }
}
