//! [`parse_duration`]: the one reading of durations, for the `distlock` command's arguments,
//! the `DISTLOCK_*` variables and [`Config`](crate::Config) files.

use std::time::Duration;

use crate::error::{Error, Result};

/// Parses a duration as distlock reads it everywhere: the `distlock` command's arguments, the
/// `DISTLOCK_*` variables and [`Config`](crate::Config).
///
/// humantime's form (`30s`, `1m 30s`, `250ms`, `2h`), a bare number of **seconds** (`30`,
/// `0.5`), as flock's `-w` takes it, or an ISO-8601 duration as ShedLock's `lockAtMostFor`
/// and Java's `Duration.parse` take it (`PT10M`, `PT0.5S`, `P1DT2H`; days, hours, minutes
/// and seconds, a fraction on the seconds only). Redisson writes milliseconds
/// (`lockWatchdogTimeout: 30000`); here that is `30000ms` or `30s`.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for text that is none of
/// these; the message quotes it and says what is wrong (ISO-8601 years, months and weeks,
/// which are not a fixed length, are refused with the form to use).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// assert_eq!(distlock::parse_duration("1m 30s")?, Duration::from_secs(90));
/// assert_eq!(distlock::parse_duration("0.5")?, Duration::from_millis(500));
/// assert_eq!(distlock::parse_duration("PT10M")?, Duration::from_secs(600));
/// assert!(distlock::parse_duration("soon").is_err());
/// # Ok::<(), distlock::Error>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return text
            .parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| Error::invalid(format!("{text:?}: not a number of seconds")));
    }
    if text.starts_with(['P', 'p']) {
        return parse_iso8601(text).map_err(|e| Error::invalid(format!("{text:?}: {e}")));
    }
    humantime::parse_duration(text).map_err(|e| {
        let hint = if text.starts_with(['-', '+']) && text[1..].starts_with(['P', 'p']) {
            " (an ISO-8601 duration takes no sign)"
        } else {
            ""
        };
        Error::invalid(format!("{text:?}: {e}{hint}"))
    })
}

/// An ISO-8601 duration as Java's `Duration.parse` reads it (ShedLock's `"PT10M"`):
/// `P[nD][T[nH][nM][n[.n]S]]`, letters in either case, at least one part, a fraction on the
/// seconds only. No sign; no years, months or weeks (not a fixed length).
fn parse_iso8601(s: &str) -> std::result::Result<Duration, String> {
    let upper = s.to_ascii_uppercase();
    let rest = &upper[1..];
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    let mut total = Duration::ZERO;
    let mut parts = 0;
    let mut read = |text: &str, units: &[(char, u64)]| -> std::result::Result<(), String> {
        let mut number = String::new();
        let mut allowed = units;
        for c in text.chars() {
            if c.is_ascii_digit() || c == '.' {
                number.push(c);
                continue;
            }
            let Some(at) = allowed.iter().position(|(u, _)| *u == c) else {
                return Err(match c {
                    'Y' | 'W' => "years and weeks are not a fixed duration: write days (P7D) or \
                                  hours (PT168H)"
                        .to_string(),
                    'M' if units[0].0 == 'D' => "months are not a fixed duration (minutes are \
                                                 PT…M, after the T): write days (P30D)"
                        .to_string(),
                    _ => format!("unexpected {c:?}: ISO-8601 durations read P[nD][T[nH][nM][nS]]"),
                });
            };
            let secs = allowed[at].1;
            let value = if c == 'S' {
                number.parse::<f64>().ok().filter(|_| !number.is_empty())
            } else if number.contains('.') {
                return Err("only the seconds may have a fraction (PT1.5S)".to_string());
            } else {
                number.parse::<u64>().ok().map(|n| n as f64)
            }
            .ok_or_else(|| format!("no number before {c:?}"))?;
            let part = Duration::try_from_secs_f64(value * secs as f64)
                .map_err(|_| "out of range".to_string())?;
            total = total.checked_add(part).ok_or("out of range")?;
            parts += 1;
            number.clear();
            allowed = &allowed[at + 1..];
        }
        if number.is_empty() {
            Ok(())
        } else {
            Err(format!("{number:?} has no unit (D, H, M or S)"))
        }
    };
    read(date, &[('D', 86_400)])?;
    if let Some(time) = time {
        if time.is_empty() {
            return Err("nothing after the T".to_string());
        }
        read(time, &[('H', 3_600), ('M', 60), ('S', 1)])?;
    }
    if parts == 0 {
        return Err("an ISO-8601 duration needs a part: PT10M, PT30S, P1D".to_string());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    /// ShedLock's and Java's ISO-8601 durations read as they do there, in the library's
    /// parser (so in `Config` files and `DISTLOCK_*` variables too, not only in the CLI's
    /// arguments); what they refuse, or what is not a fixed duration, is refused with a hint.
    #[test]
    fn iso8601_durations_read_as_java_reads_them() {
        for (text, secs) in [
            ("PT10M", 600.0),
            ("pt30s", 30.0),
            ("PT0.5S", 0.5),
            ("PT1H30M", 5_400.0),
            ("P1D", 86_400.0),
            ("P1DT2H3M4.25S", 93_784.25),
            ("PT0S", 0.0),
        ] {
            assert_eq!(
                parse_duration(text).ok(),
                Some(Duration::from_secs_f64(secs)),
                "{text}"
            );
        }
        for (text, said) in [
            ("P1M", "months"),
            ("P1Y", "years"),
            ("P2W", "weeks"),
            ("P", "needs a part"),
            ("PT", "nothing after the T"),
            ("PT1.5M", "fraction"),
            ("PT5", "no unit"),
            ("PT1S2M", "unexpected"),
            ("-PT5S", "no sign"),
        ] {
            let e = parse_duration(text).unwrap_err().to_string();
            assert!(e.contains(said), "{text}: {e}");
        }
    }

    /// The other forms still read as before.
    #[test]
    fn human_and_bare_second_durations() {
        assert_eq!(parse_duration("1m 30s").ok(), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5").ok(), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_duration("250ms").ok(),
            Some(Duration::from_millis(250))
        );
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
    }
}
