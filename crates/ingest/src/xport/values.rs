//! A transport file's values: IBM hexadecimal floating point, SAS's
//! missing values (`.` and the special `.A`–`.Z`, `._`), and the dates,
//! datetimes and times its display formats mark.

pub(crate) use crate::core::dates::Shown;

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

/// The missing code of a special missing value `.A`–`.Z`, `._` (`tag` its
/// letter or `_`) in a numeric column (Stata's code of `.a`–`.z`, `._`
/// after them).
pub(crate) fn special_code(tag: u8) -> f64 {
    crate::core::dates::tagged_code(match tag {
        b'_' => 27,
        t => u64::from(t - b'A') + 1,
    })
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
        "DTYEAR", "DTMONYY", "DTWKDATX", "DTYYQC", "E8601DN", "B8601DN",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::dates::iso;

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
