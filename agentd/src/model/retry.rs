//! How long to wait before another attempt: exponential backoff with jitter, or what the server
//! asked for in `Retry-After` (or `retry-after-ms`), never longer than the configured cap.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::HeaderMap;
use hyper::header::RETRY_AFTER;

/// The longest wait a server's `Retry-After` is taken at, before the cap applies: a day.
const MAX_SERVER_WAIT: Duration = Duration::from_secs(86_400);

/// The wait before retry number `retry` (0 for the first): `base` doubled per retry, capped at
/// `cap`, then between half of it and all of it.
pub(crate) fn backoff(base: Duration, cap: Duration, retry: u32) -> Duration {
    let full = base.saturating_mul(1u32 << retry.min(20)).min(cap);
    let half = full / 2;
    half + half.mul_f64(jitter())
}

/// The wait the server asked for, if it did: `retry-after-ms` (OpenAI, Azure), else
/// `Retry-After` as seconds or as an HTTP date (RFC 9110), relative to `now`.
pub(crate) fn server_wait(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let wait = if let Some(ms) = text("retry-after-ms").and_then(seconds) {
        Some(ms / 1000)
    } else {
        let value = headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())?
            .trim();
        match seconds(value) {
            Some(wait) => Some(wait),
            None => {
                let at = http_date(value)?;
                Some(at.duration_since(now).unwrap_or(Duration::ZERO))
            }
        }
    };
    wait.map(|w| w.min(MAX_SERVER_WAIT))
}

/// A non-negative decimal number, as that many seconds (the caller scales milliseconds).
fn seconds(text: &str) -> Option<Duration> {
    let value: f64 = text.parse().ok()?;
    (value.is_finite() && value >= 0.0)
        .then(|| Duration::from_secs_f64(value.min(MAX_SERVER_WAIT.as_secs_f64() * 1000.0)))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP servers send.
fn http_date(text: &str) -> Option<SystemTime> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = words.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u32 + 1;
    let day: u32 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
    let year: i64 = year.parse().ok().filter(|y| *y >= 1970)?;
    let mut clock = time.split(':').map(|part| part.parse::<u64>().ok());
    let (Some(Some(h)), Some(Some(m)), Some(Some(s)), None) =
        (clock.next(), clock.next(), clock.next(), clock.next())
    else {
        return None;
    };
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    let secs = days * 86_400 + h * 3600 + m * 60 + s;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A number in [0, 1) that differs between calls, for backoff jitter.
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let (base, cap) = (Duration::from_millis(100), Duration::from_millis(1000));
        for (retry, full) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (40, 1000),
        ] {
            let wait = backoff(base, cap, retry);
            let full = Duration::from_millis(full);
            assert!(wait >= full / 2 && wait <= full, "retry {retry}: {wait:?}");
        }
    }

    #[test]
    fn retry_after_is_read_as_seconds_milliseconds_or_a_date() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770); // Sun, 06 Nov 1994 08:49:30 GMT
        let wait = |pairs: &[(&'static str, &'static str)]| server_wait(&headers(pairs), now);
        assert_eq!(wait(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            wait(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            wait(&[("retry-after", "7"), ("retry-after-ms", "250")]),
            Some(Duration::from_millis(250)),
            "the finer header wins"
        );
        assert_eq!(
            wait(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            wait(&[("retry-after", "Sun, 06 Nov 1994 08:49:00 GMT")]),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        for bad in [
            "-1",
            "soon",
            "NaN",
            "Sun, 06 Nov 1994 25:00:00 GMT",
            "06 Nov 1994",
        ] {
            assert_eq!(wait(&[("retry-after", bad)]), None, "{bad}");
        }
        assert_eq!(wait(&[]), None);
        assert_eq!(
            wait(&[("retry-after", "99999999999")]),
            Some(MAX_SERVER_WAIT)
        );
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1994, 11, 6), 9_075);
    }
}
