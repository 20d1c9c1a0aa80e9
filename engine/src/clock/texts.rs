//! The times of variables and log lines, rendered once per second as nginx caches them: `$time_local`
//! (`28/Sep/1970:12:00:00 +0600`), `$time_iso8601` (`1970-09-28T12:00:00+06:00`), and `$msec`.

use std::io::Write;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Broken-down local time of one second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// Seconds east of UTC.
    pub offset: i64,
}

/// `secs` since the epoch in the process's time zone (`localtime_r`, as nginx's `ngx_localtime`).
pub fn local_time(secs: i64) -> LocalTime {
    let t = secs as libc::time_t;
    // SAFETY: `tm` is plain data filled by localtime_r from a valid time_t; both pointers are to locals.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return utc(secs);
        }
        tm
    };
    LocalTime {
        year: i64::from(tm.tm_year) + 1900,
        month: u32::try_from(tm.tm_mon + 1).unwrap_or(1),
        day: u32::try_from(tm.tm_mday).unwrap_or(1),
        hour: u32::try_from(tm.tm_hour).unwrap_or(0),
        min: u32::try_from(tm.tm_min).unwrap_or(0),
        sec: u32::try_from(tm.tm_sec).unwrap_or(0),
        offset: tm.tm_gmtoff,
    }
}

/// UTC broken down without libc (the fallback when localtime_r fails).
fn utc(secs: i64) -> LocalTime {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    LocalTime {
        year,
        month: month as u32,
        day: day as u32,
        hour: (rem / 3600) as u32,
        min: (rem % 3600 / 60) as u32,
        sec: (rem % 60) as u32,
        offset: 0,
    }
}

/// A UTC offset in seconds as its sign and magnitude.
fn signed_offset(offset: i64) -> (char, i64) {
    if offset < 0 {
        ('-', -offset)
    } else {
        ('+', offset)
    }
}

/// nginx's `$time_local` of `t`.
pub fn format_local(t: &LocalTime, out: &mut Vec<u8>) {
    let month = MONTHS.get(t.month.saturating_sub(1) as usize).copied().unwrap_or("Jan");
    let (sign, off) = signed_offset(t.offset);
    let _ = write!(
        out,
        "{:02}/{month}/{}:{:02}:{:02}:{:02} {sign}{:02}{:02}",
        t.day,
        t.year,
        t.hour,
        t.min,
        t.sec,
        off / 3600,
        off % 3600 / 60
    );
}

/// nginx's `$time_iso8601` of `t`.
pub fn format_iso8601(t: &LocalTime, out: &mut Vec<u8>) {
    let (sign, off) = signed_offset(t.offset);
    let _ = write!(
        out,
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}{sign}{:02}:{:02}",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.min,
        t.sec,
        off / 3600,
        off % 3600 / 60
    );
}

/// A shard's cached log times.
#[derive(Debug, Default)]
pub struct LogClock {
    second: i64,
    millis: u32,
    pub local: Vec<u8>,
    pub iso8601: Vec<u8>,
}

impl LogClock {
    /// Reads the wall clock, re-rendering the texts when the second changed.
    pub fn update(&mut self) {
        let now = crate::clock::since_epoch();
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        self.millis = now.subsec_millis();
        if secs != self.second || self.local.is_empty() {
            self.second = secs;
            let t = local_time(secs);
            self.local.clear();
            format_local(&t, &mut self.local);
            self.iso8601.clear();
            format_iso8601(&t, &mut self.iso8601);
        }
    }

    /// `$msec`: seconds with milliseconds.
    pub fn append_msec(&self, out: &mut Vec<u8>) {
        let _ = write!(out, "{}", self.second.max(0));
        out.extend_from_slice(&[
            b'.',
            b'0' + (self.millis / 100 % 10) as u8,
            b'0' + (self.millis / 10 % 10) as u8,
            b'0' + (self.millis % 10) as u8,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_time_texts() {
        let t = LocalTime {
            year: 1970,
            month: 9,
            day: 28,
            hour: 12,
            min: 0,
            sec: 0,
            offset: 6 * 3600,
        };
        let mut out = Vec::new();
        format_local(&t, &mut out);
        assert_eq!(out, b"28/Sep/1970:12:00:00 +0600");
        out.clear();
        format_iso8601(&t, &mut out);
        assert_eq!(out, b"1970-09-28T12:00:00+06:00");
        let west = LocalTime {
            offset: -(3 * 3600 + 1800),
            ..t
        };
        out.clear();
        format_local(&west, &mut out);
        assert_eq!(out, b"28/Sep/1970:12:00:00 -0330");
    }

    #[test]
    fn utc_breakdown() {
        assert_eq!(
            utc(1_764_435_345),
            LocalTime {
                year: 2025,
                month: 11,
                day: 29,
                hour: 16,
                min: 55,
                sec: 45,
                offset: 0
            }
        );
        assert_eq!(utc(0).year, 1970);
        assert_eq!((utc(951_782_400).month, utc(951_782_400).day), (2, 29));
    }

    #[test]
    fn clock_renders_msec() {
        let mut c = LogClock::default();
        c.update();
        let mut out = Vec::new();
        c.append_msec(&mut out);
        let text = String::from_utf8(out).unwrap();
        let (s, ms) = text.split_once('.').unwrap();
        assert!(s.parse::<u64>().unwrap() > 1_700_000_000 && ms.len() == 3, "{text}");
        assert_eq!(c.local.len(), "28/Sep/1970:12:00:00 +0600".len());
    }
}
