//! A transport file's values: IBM hexadecimal floating point, SAS's
//! missing values (`.` and the special `.A`–`.Z`, `._`), and the dates,
//! datetimes and times its display formats mark.

/// A numeric field: a number, system-missing, or a special missing value
/// (`b'A'`–`b'Z'`, `b'_'`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Value(f64),
    Missing,
    Special(u8),
}

/// Decodes a numeric field of 2 to 8 bytes: IBM System/360 floating point
/// (sign, a base-16 exponent biased by 64, a 56-bit fraction truncated to
/// the field), big-endian. A missing value is its tag byte (`.`, `_`,
/// `A`–`Z`) followed by zeros. Every IBM value is within the range of a
/// double; a fraction of more than 53 significant bits rounds to nearest.
pub(crate) fn ibm(b: &[u8]) -> Num {
    if b[1..].iter().all(|&x| x == 0) {
        match b[0] {
            b'.' => return Num::Missing,
            t @ (b'A'..=b'Z' | b'_') => return Num::Special(t),
            _ => {}
        }
    }
    let mut full = [0u8; 8];
    full[..b.len()].copy_from_slice(b);
    let bits = u64::from_be_bytes(full);
    let frac = bits & 0x00FF_FFFF_FFFF_FFFF;
    if frac == 0 {
        return Num::Value(0.0);
    }
    let exp = ((bits >> 56) & 0x7F) as i32 - 64;
    // value = frac / 2^56 · 16^exp = frac · 2^(4·exp − 56): one rounding
    // (the conversion of `frac`), then an exact power of two.
    let v = frac as f64 * pow2(4 * exp - 56);
    Num::Value(if bits >> 63 == 1 { -v } else { v })
}

/// `2^k` exactly, for `k` within the normal range of doubles.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The missing code of a special missing value in a numeric column:
/// Stata's finite bit patterns for `.a`–`.z` (`.A`–`.Z` here, `._` after
/// them), so that codes stay apart from any value and an export to Stata
/// can keep them.
pub(crate) fn special_code(tag: u8) -> f64 {
    let k = match tag {
        b'_' => 27,
        t => u64::from(t - b'A') + 1,
    };
    f64::from_bits(0x7FE0_0000_0000_0000 + (k << 40))
}

/// How a display format shows a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    Number,
    /// Days since 1960-01-01.
    Date,
    /// Seconds since 1960-01-01 00:00.
    DateTime,
    /// Seconds since midnight.
    Time,
}

/// What the SAS format `name` (upper case, without width) shows.
pub(crate) fn shown(name: &str) -> Shown {
    const DATE: &[&str] = &[
        "DATE", "DDMMYY", "MMDDYY", "YYMMDD", "E8601DA", "B8601DA", "IS8601DA", "WEEKDATE",
        "WORDDATE", "WEEKDATX", "WORDDATX", "NLDATE", "DAY", "DOWNAME", "JULIAN", "MONYY", "MMYY",
        "YYMM", "YYMON", "YYQ", "MONTH", "QTR", "YEAR", "EURDFDE",
    ];
    const DATETIME: &[&str] = &[
        "DATETIME", "E8601DT", "B8601DT", "IS8601DT", "DATEAMPM", "NLDATM", "DTDATE", "MDYAMPM",
    ];
    const TIME: &[&str] = &[
        "TIME", "HHMM", "HOUR", "MMSS", "E8601TM", "B8601TM", "TIMEAMPM",
    ];
    // Suffixed variants (YYMMDDN, MMDDYYS, DDMMYYP…) share the stem.
    let is = |list: &[&str]| {
        list.iter().any(|f| {
            name == *f
                || (name.starts_with(f)
                    && name.len() == f.len() + 1
                    && matches!(f.as_bytes()[0], b'D' | b'M' | b'Y')
                    && matches!(
                        name.as_bytes()[f.len()],
                        b'B' | b'C' | b'D' | b'N' | b'P' | b'S'
                    ))
        })
    };
    if is(DATETIME) {
        Shown::DateTime
    } else if is(TIME) {
        Shown::Time
    } else if is(DATE) {
        Shown::Date
    } else {
        Shown::Number
    }
}

/// Days since 1970-01-01 as `YYYY-MM-DD` (proleptic Gregorian; Howard
/// Hinnant's civil_from_days): how every import writes a date.
pub fn iso_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days from 1960-01-01 (SAS's origin) to 1970-01-01.
const SAS_EPOCH_DAYS: i64 = 3653;

/// `HH:MM:SS`, with the fraction of a second when there is one (to the
/// microsecond, as SAS keeps times).
fn clock(secs: f64) -> String {
    let micros = (secs * 1e6).round() as i64;
    let (s, us) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let (h, m, s) = (s / 3600, (s / 60) % 60, s % 60);
    let mut out = format!("{h:02}:{m:02}:{s:02}");
    if us != 0 {
        let f = format!("{us:06}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    out
}

/// Days from 1970-01-01 to 0001-01-01 and to 10000-01-01: the dates ISO
/// text of four-digit years holds.
const FIRST_DAY: i64 = -719_162;
const PAST_LAST_DAY: i64 = 2_932_897;

/// A date, datetime or time as ISO 8601 text (`None`: a date outside the
/// years 1 to 9999, or a time beyond any).
pub(crate) fn iso(v: f64, how: Shown) -> Option<String> {
    if !v.is_finite() || v.abs() > 1e13 {
        return None;
    }
    let in_years = |days: f64| (FIRST_DAY..PAST_LAST_DAY).contains(&(days as i64 - SAS_EPOCH_DAYS));
    match how {
        Shown::Date if !in_years(v.floor()) => return None,
        Shown::DateTime if !in_years((v / 86_400.0).floor()) => return None,
        _ => {}
    }
    Some(match how {
        Shown::Date => iso_date(v.floor() as i64 - SAS_EPOCH_DAYS),
        Shown::DateTime => {
            let days = (v / 86_400.0).floor();
            let rest = v - days * 86_400.0;
            // A fraction that rounds to the next day.
            let (days, rest) = if (rest * 1e6).round() >= 86_400e6 {
                (days + 1.0, 0.0)
            } else {
                (days, rest)
            };
            format!("{}T{}", iso_date(days as i64 - SAS_EPOCH_DAYS), clock(rest))
        }
        Shown::Time => {
            if v < 0.0 {
                format!("-{}", clock(-v))
            } else {
                clock(v)
            }
        }
        Shown::Number => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IBM encodings from the XPORT specification (TS-140) and by hand.
    #[test]
    fn ibm_values() {
        let v = |bytes: [u8; 8]| ibm(&bytes);
        assert_eq!(v([0x41, 0x10, 0, 0, 0, 0, 0, 0]), Num::Value(1.0));
        assert_eq!(v([0xC1, 0x10, 0, 0, 0, 0, 0, 0]), Num::Value(-1.0));
        assert_eq!(v([0x42, 0x64, 0, 0, 0, 0, 0, 0]), Num::Value(100.0));
        assert_eq!(v([0x40, 0x80, 0, 0, 0, 0, 0, 0]), Num::Value(0.5));
        // 0.1 = 0x401999999999999A in IBM (rounded up in the last digit).
        let Num::Value(x) = v([0x40, 0x19, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A]) else {
            panic!()
        };
        assert!((x - 0.1).abs() < 1e-16, "{x}");
        assert_eq!(v([0; 8]), Num::Value(0.0));
        assert_eq!(v([b'.', 0, 0, 0, 0, 0, 0, 0]), Num::Missing);
        assert_eq!(v([b'A', 0, 0, 0, 0, 0, 0, 0]), Num::Special(b'A'));
        assert_eq!(v([b'_', 0, 0, 0, 0, 0, 0, 0]), Num::Special(b'_'));
        // A truncated field: 3 bytes of 1.0.
        assert_eq!(ibm(&[0x41, 0x10, 0]), Num::Value(1.0));
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(iso(0.0, Shown::Date).unwrap(), "1960-01-01");
        assert_eq!(iso(21_310.0, Shown::Date).unwrap(), "2018-05-06");
        assert_eq!(iso(-1.0, Shown::Date).unwrap(), "1959-12-31");
        assert_eq!(
            iso(-86_401.0, Shown::DateTime).unwrap(),
            "1959-12-30T23:59:59"
        );
        assert_eq!(iso(36_610.5, Shown::Time).unwrap(), "10:10:10.5");
        // SAS day −715,509 is 0001-01-01, day 2,936,549 is 9999-12-31.
        assert_eq!(iso(-715_509.0, Shown::Date).unwrap(), "0001-01-01");
        assert_eq!(iso(-715_510.0, Shown::Date), None);
        assert_eq!(iso(2_936_549.0, Shown::Date).unwrap(), "9999-12-31");
        assert_eq!(iso(2_936_550.0, Shown::Date), None);
        assert_eq!(
            iso(2_936_550.0 * 86_400.0 - 1.0, Shown::DateTime).unwrap(),
            "9999-12-31T23:59:59"
        );
        assert_eq!(shown("YYMMDD"), Shown::Date);
        assert_eq!(shown("MMDDYYS"), Shown::Date);
        assert_eq!(shown("DATETIME"), Shown::DateTime);
        assert_eq!(shown("TIME"), Shown::Time);
        assert_eq!(shown("BEST"), Shown::Number);
        assert_eq!(shown("DOLLAR"), Shown::Number);
    }
}
