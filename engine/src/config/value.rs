//! Values as nginx parses them: numbers (`ngx_atoi`), sizes (`10k`, `1m`: `ngx_parse_size`, and `ngx_parse_offset`
//! with `g`), and times (`10s`, `1m`, `500ms`, `1h30m`: `ngx_parse_time`). Addresses are in [`super::url`].

use std::time::Duration;

/// nginx's `NGX_MAX_INT_T_VALUE` on 64-bit systems (also its largest `size_t`/`off_t` value).
const MAX_INT: u64 = i64::MAX as u64;

/// `ngx_atoi`: decimal digits only (no sign, no spaces), non-empty, at most `i64::MAX`.
pub fn atoi(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if value > MAX_INT {
            return None;
        }
    }
    Some(value)
}

/// A number with an optional unit suffix, scaled, as `ngx_parse_size`/`ngx_parse_offset` do.
fn scaled(s: &str, units: &[(u8, u64)]) -> Option<u64> {
    let last = s.bytes().last()?;
    let (digits, scale) = match units.iter().find(|(u, _)| last.eq_ignore_ascii_case(u)) {
        Some(&(_, scale)) => (s.get(..s.len() - 1)?, scale),
        None => (s, 1),
    };
    let n = atoi(digits)?;
    if n > MAX_INT / scale {
        return None;
    }
    Some(n * scale)
}

/// `ngx_parse_size`: bytes, with an optional `k`/`K` or `m`/`M` suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    scaled(s, &[(b'k', 1024), (b'm', 1024 * 1024)])
}

/// `ngx_parse_offset`: like [`parse_size`], also with `g`/`G`.
pub fn parse_offset(s: &str) -> Option<u64> {
    scaled(s, &[(b'k', 1024), (b'm', 1024 * 1024), (b'g', 1024 * 1024 * 1024)])
}

/// The units of `ngx_parse_time`, in the order they must appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Start,
    Year,
    Month,
    Week,
    Day,
    Hour,
    Min,
    Sec,
    Msec,
    Last,
}

/// `ngx_parse_time`: `1h30m`, `500ms`, `10` (seconds). With `is_sec` the result is in seconds and `ms` is refused;
/// otherwise it is in milliseconds and `y`/`M` (years, months) are refused. Units must come in decreasing order,
/// each once; a space may separate parts.
pub fn parse_time(s: &str, is_sec: bool) -> Option<u64> {
    let b = s.as_bytes();
    let mut step = if is_sec { Step::Start } else { Step::Month };
    let (mut value, mut total, mut valid) = (0u64, 0u64, false);
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        i += 1;
        if c.is_ascii_digit() {
            value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            if value > MAX_INT {
                return None;
            }
            valid = true;
            continue;
        }
        let (next, mut scale) = match c {
            b'y' => (Step::Year, 60 * 60 * 24 * 365),
            b'M' => (Step::Month, 60 * 60 * 24 * 30),
            b'w' => (Step::Week, 60 * 60 * 24 * 7),
            b'd' => (Step::Day, 60 * 60 * 24),
            b'h' => (Step::Hour, 60 * 60),
            b'm' if b.get(i) == Some(&b's') => {
                if is_sec {
                    return None;
                }
                i += 1;
                (Step::Msec, 1)
            }
            b'm' => (Step::Min, 60),
            b's' => (Step::Sec, 1),
            b' ' => (Step::Last, 1),
            _ => return None,
        };
        // A space may only follow a unit below seconds; every other unit must come after the previous one.
        let out_of_order = if next == Step::Last {
            step >= Step::Sec
        } else if next == Step::Year {
            step > Step::Start
        } else {
            step >= next
        };
        if out_of_order {
            return None;
        }
        step = next;
        if step != Step::Msec && !is_sec {
            scale *= 1000;
        }
        value = value.checked_mul(scale).filter(|v| *v <= MAX_INT)?;
        total = total.checked_add(value).filter(|t| *t <= MAX_INT)?;
        value = 0;
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
    }
    if !valid {
        return None;
    }
    if !is_sec {
        value = value.checked_mul(1000).filter(|v| *v <= MAX_INT)?;
    }
    total.checked_add(value).filter(|t| *t <= MAX_INT)
}

/// A time for a millisecond slot (`proxy_read_timeout 500ms`).
pub fn parse_msec(s: &str) -> Option<Duration> {
    parse_time(s, false).map(Duration::from_millis)
}

/// A time for a seconds slot (`fail_timeout=10s`).
pub fn parse_sec(s: &str) -> Option<Duration> {
    parse_time(s, true).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_ngx_atoi() {
        assert_eq!(atoi("0"), Some(0));
        assert_eq!(atoi("0042"), Some(42));
        assert_eq!(atoi("9223372036854775807"), Some(i64::MAX as u64));
        assert_eq!(atoi("9223372036854775808"), None);
        assert_eq!(atoi(""), None);
        assert_eq!(atoi("-1"), None);
        assert_eq!(atoi("+1"), None);
        assert_eq!(atoi("1 "), None);
        assert_eq!(atoi("1k"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("10k"), Some(10 * 1024));
        assert_eq!(parse_size("10K"), Some(10 * 1024));
        assert_eq!(parse_size("1m"), Some(1024 * 1024));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("1g"), None);
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("1.5m"), None);
        assert_eq!(parse_size("9007199254740992k"), None);
        assert_eq!(parse_offset("2g"), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_offset("0"), Some(0));
    }

    #[test]
    fn times_in_milliseconds() {
        assert_eq!(parse_time("10s", false), Some(10_000));
        assert_eq!(parse_time("10", false), Some(10_000));
        assert_eq!(parse_time("1m", false), Some(60_000));
        assert_eq!(parse_time("500ms", false), Some(500));
        assert_eq!(parse_time("1h30m", false), Some(5_400_000));
        assert_eq!(parse_time("1h 30m", false), Some(5_400_000));
        assert_eq!(parse_time("1d2h3m4s5ms", false), Some(93_784_005));
        assert_eq!(parse_time("2w", false), Some(14 * 86_400_000));
        assert_eq!(parse_time("0", false), Some(0));
        // nginx: years and months are refused in millisecond slots; units must decrease; each once.
        assert_eq!(parse_time("1y", false), None);
        assert_eq!(parse_time("1M", false), None);
        assert_eq!(parse_time("30m1h", false), None);
        assert_eq!(parse_time("1s1s", false), None);
        assert_eq!(parse_time("1 2s", false), None);
        assert_eq!(parse_time("1s 2", false), Some(3000));
        assert_eq!(parse_time("", false), None);
        assert_eq!(parse_time("s", false), None);
        assert_eq!(parse_time("1x", false), None);
        assert_eq!(parse_time("-1s", false), None);
        // A bare trailing number counts as seconds, even after a space.
        assert_eq!(parse_time("1m 5", false), Some(65_000));
    }

    #[test]
    fn times_in_seconds() {
        assert_eq!(parse_time("10", true), Some(10));
        assert_eq!(parse_time("10s", true), Some(10));
        assert_eq!(parse_time("1m30s", true), Some(90));
        assert_eq!(parse_time("1y", true), Some(31_536_000));
        assert_eq!(parse_time("1M", true), Some(2_592_000));
        assert_eq!(parse_time("1y1M", true), Some(31_536_000 + 2_592_000));
        assert_eq!(parse_time("500ms", true), None);
        assert_eq!(parse_sec("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_msec("250ms"), Some(Duration::from_millis(250)));
    }

    #[test]
    fn times_overflow_is_an_error() {
        assert_eq!(parse_time("9223372036854775807", true), Some(i64::MAX as u64));
        assert_eq!(parse_time("9223372036854775807", false), None);
        assert_eq!(parse_time("99999999999999999999s", true), None);
        assert_eq!(parse_time("9223372036854775y", true), None);
    }
}
