//! Dates, datetimes and times as ISO 8601 text (how every import writes
//! them), and the missing codes of tagged missing values (Stata's `.a`–`.z`,
//! SAS's `.A`–`.Z`/`._`), shared by the binary formats.

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
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}");
    }
    // Digits by hand: imports write one per date value.
    let digit = |v: i64| (b'0' + v as u8) as char;
    let mut s = String::with_capacity(10);
    s.extend([
        digit(y / 1000),
        digit(y / 100 % 10),
        digit(y / 10 % 10),
        digit(y % 10),
        '-',
        digit(m / 10),
        digit(m % 10),
        '-',
        digit(d / 10),
        digit(d % 10),
    ]);
    s
}

/// Days from 1960-01-01 (SAS's origin) to 1970-01-01.
pub(crate) const SAS_EPOCH_DAYS: i64 = 3653;

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

/// The missing code of the `k`-th tagged missing value (1 = `.a`/`.A`, …,
/// 26 = `.z`/`.Z`, 27 = SAS's `._`) in a floating-point column: Stata's
/// finite bit patterns for `.a`–`.z` (8.99e307 and up), so that codes stay
/// apart from any value and an export to Stata can keep them.
pub(crate) fn tagged_code(k: u64) -> f64 {
    f64::from_bits(0x7FE0_0000_0000_0000 + (k << 40))
}

/// Milliseconds since 1960-01-01 00:00 (Stata's `%tc`) as ISO 8601 text,
/// split into days and milliseconds in integers, so that no fraction of a
/// second appears that the value does not hold; `None` outside the years
/// 1 to 9999.
pub(crate) fn iso_ms(ms: f64) -> Option<String> {
    if !ms.is_finite() || ms.abs() > 1e15 {
        return None;
    }
    let ms = ms.round() as i64;
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let date = iso(days as f64, Shown::Date)?;
    Some(format!("{date}T{}", clock(rest as f64 / 1000.0)))
}

/// The key of a date, datetime or time number `v` in a keyed text column
/// (`crate::columnar::KeyChunk`): the bits of `v` (a date's day, floored),
/// shown by [`show_key`]'s `how`; `None` where [`iso`] gives no text.
pub(crate) fn date_key(v: f64, how: Shown) -> Option<u64> {
    if !v.is_finite() || v.abs() > 1e13 {
        return None;
    }
    let in_years = |days: f64| (FIRST_DAY..PAST_LAST_DAY).contains(&(days as i64 - SAS_EPOCH_DAYS));
    match how {
        Shown::Date if in_years(v.floor()) => Some((v.floor() + 0.0).to_bits()),
        Shown::DateTime if in_years((v / 86_400.0).floor()) => Some((v + 0.0).to_bits()),
        Shown::Time => Some((v + 0.0).to_bits()),
        _ => None,
    }
}

/// The key of Stata's `%tc` milliseconds `ms` (shown by [`show_ms`]);
/// `None` where [`iso_ms`] gives no text.
pub(crate) fn ms_key(ms: f64) -> Option<u64> {
    if !ms.is_finite() || ms.abs() > 1e15 {
        return None;
    }
    let ms = ms.round();
    let days = (ms / 86_400_000.0).floor();
    date_key(days, Shown::Date).map(|_| (ms + 0.0).to_bits())
}

/// The key of a tagged missing value shown as `.` and `tag` (`.A`, `.a`,
/// `._`): a NaN, apart from every number's key.
pub(crate) fn tag_key(tag: u8) -> u64 {
    0x7FF8_0000_0000_0000 | u64::from(tag)
}

fn shown_tag(k: u64) -> Option<String> {
    f64::from_bits(k)
        .is_nan()
        .then(|| format!(".{}", (k & 0xFF) as u8 as char))
}

/// A date key's text.
pub(crate) fn show_date(k: u64) -> String {
    shown_tag(k).unwrap_or_else(|| iso(f64::from_bits(k), Shown::Date).unwrap_or_default())
}

/// A datetime key's text.
pub(crate) fn show_datetime(k: u64) -> String {
    shown_tag(k).unwrap_or_else(|| iso(f64::from_bits(k), Shown::DateTime).unwrap_or_default())
}

/// A time key's text.
pub(crate) fn show_time(k: u64) -> String {
    shown_tag(k).unwrap_or_else(|| iso(f64::from_bits(k), Shown::Time).unwrap_or_default())
}

/// A `%tc` key's text.
pub(crate) fn show_ms(k: u64) -> String {
    shown_tag(k).unwrap_or_else(|| iso_ms(f64::from_bits(k)).unwrap_or_default())
}

/// The function that shows the keys of `how` ([`date_key`]).
pub(crate) fn show_key(how: Shown) -> fn(u64) -> String {
    match how {
        Shown::DateTime => show_datetime,
        Shown::Time => show_time,
        _ => show_date,
    }
}
