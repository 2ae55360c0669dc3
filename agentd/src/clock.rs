//! Times as agentd shows them: milliseconds since the Unix epoch, printed in UTC.

/// `YYYY-MM-DD HH:MM` (UTC), for listings.
pub fn utc_minute(ms: u64) -> String {
    let (year, month, day, h, m, _) = civil(ms);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}")
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC), for the protocol.
pub fn rfc3339(ms: u64) -> String {
    let (year, month, day, h, m, s) = civil(ms);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

/// Year, month, day, hour, minute, second of `ms` (proleptic Gregorian, H. Hinnant's
/// `civil_from_days`).
fn civil(ms: u64) -> (u64, u64, u64, u64, u64, u64) {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day, rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00");
        assert_eq!(utc_minute(951_782_400_000), "2000-02-29 00:00");
        assert_eq!(utc_minute(1_796_211_059_999), "2026-12-02 11:30");
        assert_eq!(utc_minute(4_107_542_400_000), "2100-03-01 00:00");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_208_000_000), "2026-12-02T10:40:00Z");
        assert_eq!(rfc3339(951_782_400_000 + 3_723_000), "2000-02-29T01:02:03Z");
    }
}
