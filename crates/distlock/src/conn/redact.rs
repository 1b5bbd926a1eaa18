//! `redact_url`: passwords masked out of server URLs, for messages, logs and `Debug`.

/// Redacts a URL's password: `redis://user:secret@host/` → `redis://user:***@host/`.
///
/// A lone user name (`redis://secret@host/`, which some clients take for the password) is masked
/// whole: `redis://***@host/`. The credentials end at the last `@` of the URL, so a password
/// holding `/`, `?` or `#` (which should be percent-encoded, but may not be) is masked whole too:
/// such a URL, or one the URL parser refuses (a Sentinel or Cluster URL with several `host:port`),
/// is masked from `://` to that `@`. Text without a scheme or `@` that does not look like an
/// address (`host:port`, a host name with a dot, `localhost`) may be a password put where the
/// URL goes: it is masked whole (`***`). A password in the query
/// (`redis+unix:///run/redis.sock?pass=secret`, redis-rs's form for Unix sockets) is masked as
/// `pass=***`.
///
/// What distlock shows wherever it names a server ([`Client::redacted_url`](crate::Client::redacted_url),
/// errors, logs); public so that applications and tools mask URLs the same way.
///
/// # Examples
/// ```
/// assert_eq!(
///     distlock::redact_url("redis://app:secret@cache-1:6379/0"),
///     "redis://app:***@cache-1:6379/0"
/// );
/// assert_eq!(distlock::redact_url("app:secret@cache-1:6379"), "app:***@cache-1:6379");
/// ```
pub fn redact_url(url: &str) -> String {
    if !url.contains("://") && !url.contains('@') && !url.is_empty() && !looks_like_address(url) {
        return "***".to_string();
    }
    mask_query_password(&redact_userinfo(url))
}

/// Mask the values of `pass` and `password` query parameters.
fn mask_query_password(url: &str) -> String {
    let Some((base, rest)) = url.split_once('?') else {
        return url.to_string();
    };
    let (query, fragment) = match rest.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (rest, None),
    };
    let masked: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _))
                if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
            {
                format!("{k}=***")
            }
            _ => pair.to_string(),
        })
        .collect();
    let mut out = format!("{base}?{}", masked.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// The userinfo part of [`redact_url`]. Text without `://` (a URL whose scheme was left out,
/// `app:secret@host:6379`) is masked up to its last `@` all the same.
fn redact_userinfo(url: &str) -> String {
    let scheme_end = url.find("://").map(|i| i + 3);
    let Some(scheme_end) = scheme_end.or_else(|| url.rfind('@').map(|_| 0)) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let Some(at) = rest.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    // Without `/`, `?` or `#` before it, the last `@` ends the parser's authority too, so the
    // parser's credentials are everything before it.
    if scheme_end > 0 && !userinfo.contains(['/', '?', '#']) {
        if let Ok(mut parsed) = ::url::Url::parse(url) {
            let masked = if parsed.password().is_none() {
                parsed.set_username("***")
            } else {
                parsed.set_password(Some("***"))
            };
            if masked.is_ok() {
                return parsed.into();
            }
        }
    }
    let user = userinfo.split(':').next().unwrap_or("");
    let masked = if userinfo.contains(':') && !user.contains(['/', '?', '#']) {
        format!("{user}:***")
    } else {
        "***".to_string()
    };
    format!("{}{}@{}", &url[..scheme_end], masked, &rest[at + 1..])
}

/// Whether `text` (a server URL given without a scheme) looks like an address that is safe
/// to quote in a message: `host:port` with a numeric port, or a host name with a dot (or
/// `localhost`), of host-name characters only. Anything else may be a password pasted in the
/// wrong place, and is not shown.
pub(crate) fn looks_like_address(text: &str) -> bool {
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (h, Some(p)),
        _ => (text, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'));
    match port {
        Some(p) => host_ok && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()),
        None => host_ok && (host.contains('.') || host == "localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::{looks_like_address, redact_url};

    #[test]
    fn only_addresses_are_quoted() {
        for a in [
            "localhost",
            "localhost:6379",
            "10.0.0.1",
            "h:1",
            "cache.internal",
            "[::1]:6379",
        ] {
            assert!(looks_like_address(a), "{a}");
        }
        for a in ["hunter2", "s3cret!pw", "p@ss", "h:port", "", "pass word.x"] {
            assert!(!looks_like_address(a), "{a}");
        }
    }

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("rediss://app:hunter2@host/"),
            "rediss://app:***@host/"
        );
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert!(!redact_url("redis://u:p@ss@h/").contains("p@ss"));
        assert!(!redact_url("redis://u:se/cret@h/").contains("cret"));
        assert!(!redact_url("redis-sentinel://u:a#b?c@h1,h2#m").contains("a#b"));
    }

    #[test]
    fn the_parser_keeps_the_rest_of_the_url() {
        // An unencoded `@` in the password: the credentials end at the last one.
        assert_eq!(redact_url("redis://u:p@ss@h/"), "redis://u:***@h/");
        assert_eq!(
            redact_url("redis://app:s%40cret@[::1]:6380/2?protocol=resp3#insecure"),
            "redis://app:***@[::1]:6380/2?protocol=resp3#insecure"
        );
        assert_eq!(
            redact_url("redis-cluster://app:hunter2@h1,h2,h3"),
            "redis-cluster://app:***@h1,h2,h3"
        );
        assert_eq!(redact_url("no url at all"), "***");
        assert_eq!(redact_url("hunter2"), "***");
    }

    #[test]
    fn a_url_without_a_scheme_is_masked_too() {
        assert_eq!(
            redact_url("app:hunter2@127.0.0.1:6379"),
            "app:***@127.0.0.1:6379"
        );
        assert_eq!(redact_url(":hunter2@host"), ":***@host");
        assert_eq!(redact_url("hunter2@host"), "***@host");
        assert_eq!(redact_url("localhost:6379"), "localhost:6379");
    }

    #[test]
    fn a_password_in_the_query_is_masked() {
        assert_eq!(
            redact_url("redis+unix:///run/redis.sock?db=1&pass=hunter2"),
            "redis+unix:///run/redis.sock?db=1&pass=***"
        );
        assert_eq!(
            redact_url("unix:///tmp/r.sock?user=app&password=hunter2#x"),
            "unix:///tmp/r.sock?user=app&password=***#x"
        );
    }

    #[test]
    fn a_lone_user_name_is_masked_whole() {
        assert_eq!(redact_url("redis://secret@host/"), "redis://***@host/");
        assert_eq!(
            redact_url("redis://secret@host:6379"),
            "redis://***@host:6379"
        );
    }

    #[test]
    fn unparsable_urls_are_masked_up_to_the_last_at() {
        // Several `host:port` (the parser refuses them): the user name stays.
        assert_eq!(
            redact_url("redis-sentinel://u:p@h1:26379,h2:26379/0#mymaster"),
            "redis-sentinel://u:***@h1:26379,h2:26379/0#mymaster"
        );
        // A `/` in the password (the parser would end the credentials there).
        assert_eq!(redact_url("redis://u:se/cret@h/"), "redis://u:***@h/");
        // `redis://u:12/x@h/` parses as host `u`, port 12, no credentials: still masked.
        assert_eq!(redact_url("redis://u:12/x@h/"), "redis://u:***@h/");
        // A `/` in the user name: all of it.
        assert_eq!(redact_url("redis://u/v:pw@h/"), "redis://***@h/");
        assert_eq!(
            redact_url("redis-sentinel://u:a#b?c@h1,h2#m"),
            "redis-sentinel://u:***@h1,h2#m"
        );
    }
}
