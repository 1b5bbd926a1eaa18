//! lettuce's multi-host URL forms, shared by Sentinel and Cluster:
//! `<scheme>://[user:password@]host1[:port1][,host2[:port2]…][/db][?query][#fragment]`.

/// The parts of a multi-host URL. Error messages never quote the credentials.
#[derive(Clone)]
pub(crate) struct MultiHost {
    /// `redis` or `rediss` (TLS).
    pub(crate) scheme: &'static str,
    /// `host:port` of each node, in the URL's order (defaulted ports filled in).
    pub(crate) hosts: Vec<String>,
    /// `user:password@` as written (still percent-encoded), or empty.
    pub(crate) userinfo: String,
    /// `/<db>`, or empty.
    pub(crate) db_path: String,
    /// `?…` without `insecure`, or empty.
    pub(crate) query: String,
    /// `#insecure` when the query asked for TLS without certificate checks (redis-rs's
    /// spelling, which lettuce's forms cannot use: their fragment means something else).
    pub(crate) insecure: &'static str,
    /// The fragment after `#`, if any.
    pub(crate) fragment: Option<String>,
}

impl MultiHost {
    /// Parse `url` whose scheme is `<plain>://` (→ `redis`) or `<tls>://` (→ `rediss`); hosts
    /// without a port get `default_port`; `what` names a host in messages ("sentinel").
    pub(crate) fn parse(
        url: &str,
        plain: &str,
        tls: &str,
        default_port: u16,
        what: &str,
    ) -> Result<MultiHost, String> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix(&format!("{plain}://")) {
            ("redis", rest)
        } else if let Some(rest) = url.strip_prefix(&format!("{tls}://")) {
            ("rediss", rest)
        } else {
            return Err(format!("not a {plain}:// or {tls}:// URL"));
        };
        // Credentials first, up to the last `@`: a password may hold `/`, `?` or `#`.
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((u, r)) => (format!("{u}@"), r),
            None => (String::new(), rest),
        };
        let (rest, fragment) = match rest.rsplit_once('#') {
            Some((r, f)) => (r, Some(f.to_string())),
            None => (rest, None),
        };
        let (rest, query, insecure) = match rest.split_once('?') {
            Some((r, q)) => {
                let insecure = q.split('&').any(|p| p == "insecure");
                let kept: Vec<&str> = q
                    .split('&')
                    .filter(|p| *p != "insecure" && !p.is_empty())
                    .collect();
                let query = if kept.is_empty() {
                    String::new()
                } else {
                    format!("?{}", kept.join("&"))
                };
                (r, query, if insecure { "#insecure" } else { "" })
            }
            None => (rest, String::new(), ""),
        };
        let (authority, db_path) = match rest.split_once('/') {
            Some((a, "")) => (a, String::new()),
            Some((a, db)) => {
                if db.parse::<u32>().is_err() {
                    return Err(format!("the database {db:?} is not a number"));
                }
                (a, format!("/{db}"))
            }
            None => (rest, String::new()),
        };
        let mut hosts = Vec::new();
        for host in authority.split(',') {
            if host.is_empty() {
                return Err(format!("an empty {what} address"));
            }
            let has_port = match host.rfind(']') {
                Some(end) => host[end..].contains(':'),
                None => host.contains(':'),
            };
            if has_port {
                let (_, port) = host.rsplit_once(':').expect("has a colon");
                if port.parse::<u16>().is_err() {
                    return Err(format!("{what} address {host:?}: bad port"));
                }
                hosts.push(host.to_string());
            } else {
                hosts.push(format!("{host}:{default_port}"));
            }
        }
        Ok(MultiHost {
            scheme,
            hosts,
            userinfo,
            db_path,
            query,
            insecure,
            fragment,
        })
    }

    /// A redis-rs URL for one node at `addr` (`host:port`), with `userinfo` (`user:pass@` or
    /// empty) and this URL's database, query and TLS settings.
    pub(crate) fn node_url(&self, userinfo: &str, addr: &str) -> String {
        format!(
            "{}://{userinfo}{addr}{}{}{}",
            self.scheme, self.db_path, self.query, self.insecure
        )
    }
}

/// A one-server URL with `?insecure` (the skip-verify syntax of the Sentinel and Cluster
/// URLs) in redis-rs's own form, `#insecure`; other URLs unchanged.
pub(crate) fn insecure_as_fragment(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((head, query)) = url.split_once('?') else {
        return url.into();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    if !query.split('&').any(|p| p == "insecure") {
        return url.into();
    }
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| *p != "insecure" && !p.is_empty())
        .collect();
    let mut out = head.to_string();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    out.push('#');
    out.push_str(fragment.unwrap_or("insecure"));
    out.into()
}

#[cfg(test)]
mod tests {
    use super::insecure_as_fragment as f;

    #[test]
    fn query_insecure_becomes_redis_rs_fragment() {
        assert_eq!(f("rediss://h:1/0?insecure"), "rediss://h:1/0#insecure");
        assert_eq!(
            f("rediss://h/?protocol=resp3&insecure"),
            "rediss://h/?protocol=resp3#insecure"
        );
        assert_eq!(f("rediss://h/#insecure"), "rediss://h/#insecure");
        assert_eq!(f("rediss://h/?insecure#insecure"), "rediss://h/#insecure");
        assert_eq!(f("redis://h/?protocol=resp3"), "redis://h/?protocol=resp3");
        assert_eq!(f("redis://h/"), "redis://h/");
    }
}
