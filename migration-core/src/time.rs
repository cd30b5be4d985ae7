//! Timestamps and clocks.
//!
//! The core keeps its own small RFC 3339 type instead of pulling a date crate:
//! the ledger only needs UTC instants, their canonical text form, and ordering.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A UTC instant with nanosecond precision, rendered as RFC 3339
/// (`2026-08-12T10:04:00Z`; a fraction only when it is non-zero).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    seconds: i64,
    nanos: u32,
}

/// Why a string is not an RFC 3339 timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp ({reason})")]
pub struct TimestampError {
    /// What is wrong with the input.
    pub reason: &'static str,
}

const fn err(reason: &'static str) -> TimestampError {
    TimestampError { reason }
}

impl Timestamp {
    /// The instant `seconds` after the Unix epoch.
    pub const fn from_unix(seconds: i64) -> Self {
        Timestamp { seconds, nanos: 0 }
    }

    /// Whole seconds since the Unix epoch.
    pub const fn unix_seconds(&self) -> i64 {
        self.seconds
    }

    /// The instant `seconds` and `nanos` after the epoch; `None` when
    /// `nanos` is not below one second.
    pub const fn from_unix_parts(seconds: i64, nanos: u32) -> Option<Self> {
        if nanos < 1_000_000_000 {
            Some(Timestamp { seconds, nanos })
        } else {
            None
        }
    }

    /// The fraction of the second, in nanoseconds.
    pub const fn subsec_nanos(&self) -> u32 {
        self.nanos
    }

    /// The current time from the system clock.
    pub fn now() -> Self {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp {
                seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nanos: d.subsec_nanos(),
            },
            Err(before) => Timestamp {
                seconds: -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
                nanos: 0,
            },
        }
    }

    /// This instant truncated to whole seconds, the precision the engine records.
    pub const fn truncated(self) -> Self {
        Timestamp {
            seconds: self.seconds,
            nanos: 0,
        }
    }

    /// This instant plus `d`, saturating.
    pub fn plus(self, d: Duration) -> Self {
        let mut seconds = self
            .seconds
            .saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut nanos = self.nanos + d.subsec_nanos();
        if nanos >= 1_000_000_000 {
            nanos -= 1_000_000_000;
            seconds = seconds.saturating_add(1);
        }
        Timestamp { seconds, nanos }
    }

    /// How long after `earlier` this instant is, or zero if it is not after.
    pub fn since(self, earlier: Timestamp) -> Duration {
        if self <= earlier {
            return Duration::ZERO;
        }
        let mut secs = self.seconds - earlier.seconds;
        let nanos = if self.nanos >= earlier.nanos {
            self.nanos - earlier.nanos
        } else {
            secs -= 1;
            self.nanos + 1_000_000_000 - earlier.nanos
        };
        Duration::new(u64::try_from(secs).unwrap_or(0), nanos)
    }

    /// Parses RFC 3339 (`Z` or a numeric offset; optional fraction).
    pub fn parse(input: &str) -> Result<Self, TimestampError> {
        let b = input.as_bytes();
        if b.len() < 20 {
            return Err(err("too short"));
        }
        let num = |range: std::ops::Range<usize>| -> Result<i64, TimestampError> {
            let mut v: i64 = 0;
            for &c in &b[range] {
                if !c.is_ascii_digit() {
                    return Err(err("expected a digit"));
                }
                v = v * 10 + i64::from(c - b'0');
            }
            Ok(v)
        };
        let sep = |i: usize, allowed: &[u8]| -> Result<(), TimestampError> {
            if allowed.contains(&b[i]) {
                Ok(())
            } else {
                Err(err("unexpected separator"))
            }
        };
        let year = num(0..4)?;
        sep(4, b"-")?;
        let month = num(5..7)?;
        sep(7, b"-")?;
        let day = num(8..10)?;
        sep(10, b"Tt")?;
        let hour = num(11..13)?;
        sep(13, b":")?;
        let minute = num(14..16)?;
        sep(16, b":")?;
        let second = num(17..19)?;
        if !(1..=12).contains(&month) {
            return Err(err("month out of range"));
        }
        if day < 1 || day > days_in_month(year, month) {
            return Err(err("day out of range"));
        }
        if hour > 23 || minute > 59 || second > 60 {
            return Err(err("time of day out of range"));
        }
        let mut i = 19;
        let mut nanos: u32 = 0;
        if b[i] == b'.' {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                if i - start < 9 {
                    nanos = nanos * 10 + u32::from(b[i] - b'0');
                }
                i += 1;
            }
            let digits = i - start;
            if digits == 0 {
                return Err(err("empty fraction"));
            }
            for _ in digits..9 {
                nanos *= 10;
            }
        }
        let offset_seconds = match b.get(i) {
            Some(b'Z' | b'z') if i + 1 == b.len() => 0,
            Some(sign @ (b'+' | b'-')) if i + 6 == b.len() => {
                sep(i + 3, b":")?;
                let oh = num(i + 1..i + 3)?;
                let om = num(i + 4..i + 6)?;
                if oh > 23 || om > 59 {
                    return Err(err("offset out of range"));
                }
                let total = oh * 3600 + om * 60;
                if *sign == b'+' { total } else { -total }
            }
            _ => return Err(err("expected 'Z' or a numeric offset at the end")),
        };
        // A leap second is folded onto the next second: ordering is all we need.
        let seconds =
            days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
                - offset_seconds;
        Ok(Timestamp { seconds, nanos })
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (era-based arithmetic,
/// valid for every year an `i64` day count can hold).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.seconds.div_euclid(86_400);
        let rem = self.seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            rem / 3600,
            (rem / 60) % 60,
            rem % 60
        )?;
        if self.nanos != 0 {
            let mut frac = format!("{:09}", self.nanos);
            while frac.ends_with('0') {
                frac.pop();
            }
            write!(f, ".{frac}")?;
        }
        f.write_str("Z")
    }
}

text_form!(Timestamp, TimestampError, Timestamp::parse);

/// A source of the current time, so that tests can drive lock expiry and
/// recorded timestamps deterministically.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: std::sync::Mutex<Timestamp>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            now: std::sync::Mutex::new(start),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now = now.plus(d);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_epoch_and_a_known_instant() {
        assert_eq!(Timestamp::from_unix(0).to_string(), "1970-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::from_unix(1_786_529_040).to_string(),
            "2026-08-12T10:04:00Z"
        );
    }

    #[test]
    fn parses_what_it_renders() {
        for s in [
            "2026-08-12T10:04:00Z",
            "2000-02-29T23:59:59Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(Timestamp::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn normalises_offsets_and_fractions_to_utc() {
        let t = Timestamp::parse("2026-08-12T12:04:00.5+02:00").unwrap();
        assert_eq!(t.to_string(), "2026-08-12T10:04:00.5Z");
        assert_eq!(t.truncated().to_string(), "2026-08-12T10:04:00Z");
    }

    #[test]
    fn rejects_impossible_dates_and_junk() {
        for bad in [
            "",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-01 00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00Zjunk",
            "2026-01-01T00:00:00.Z",
            "yesterday at noon, roughly",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn civil_conversion_round_trips_over_centuries() {
        for days in (-1_000_000..1_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn manual_clock_advances_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_unix(100));
        assert_eq!(clock.now(), Timestamp::from_unix(100));
        clock.advance(Duration::from_secs(30));
        assert_eq!(clock.now(), Timestamp::from_unix(130));
        assert_eq!(
            clock.now().since(Timestamp::from_unix(100)),
            Duration::from_secs(30)
        );
    }
}
