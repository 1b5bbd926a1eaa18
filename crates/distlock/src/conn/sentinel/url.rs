//! A Sentinel deployment's URL: the sentinels, the master's name, and the URLs of both.

use crate::conn::url::MultiHost;

/// Port of a sentinel given without one.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// Where a Sentinel deployment is: parsed from a `redis-sentinel://` URL.
#[derive(Clone)]
pub(crate) struct SentinelUrl {
    pub(super) url: MultiHost,
    /// The master's name in the sentinels' configuration.
    pub(super) master_name: String,
    /// `user:password@` for the sentinels, when they require auth.
    sentinel_userinfo: String,
}

impl std::fmt::Debug for SentinelUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelUrl")
            .field("sentinels", &self.url.hosts)
            .field("master_name", &self.master_name)
            .finish()
    }
}

/// Whether `url` names a Sentinel deployment (lettuce's URL form).
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    url.starts_with("redis-sentinel://") || url.starts_with("rediss-sentinel://")
}

impl SentinelUrl {
    /// Parse lettuce's form `redis-sentinel://[user:password@]host1[:port1][,host2[:port2]…][/db][?query]#master-name`
    /// (`rediss-sentinel://` for TLS). Sentinels without a port listen on 26379.
    /// `sentinel_auth` is `user:password` (or `:password`) for the sentinels, if they need it.
    ///
    /// Errors are messages without the password.
    pub(crate) fn parse(url: &str, sentinel_auth: Option<&str>) -> Result<SentinelUrl, String> {
        let mut url = MultiHost::parse(
            url,
            "redis-sentinel",
            "rediss-sentinel",
            DEFAULT_SENTINEL_PORT,
            "sentinel",
        )?;
        let master_name = url
            .fragment
            .take()
            .ok_or("no master name: end the URL with #<master-name>")?;
        if master_name.is_empty() {
            return Err("empty master name after #".into());
        }
        Ok(SentinelUrl {
            url,
            master_name,
            sentinel_userinfo: sentinel_auth.map(|a| format!("{a}@")).unwrap_or_default(),
        })
    }

    pub(super) fn master_url(&self, addr: &str) -> String {
        self.url.node_url(&self.url.userinfo, addr)
    }

    pub(super) fn sentinel_url(&self, addr: &str) -> String {
        // A sentinel has no databases: always 0; TLS settings apply to it too.
        let mut url = self.url.clone();
        url.db_path = "/".into();
        url.node_url(&self.sentinel_userinfo, addr)
    }
}

#[cfg(test)]
mod tests {
    use super::SentinelUrl;

    #[test]
    fn parses_lettuce_sentinel_urls() {
        let c = SentinelUrl::parse(
            "redis-sentinel://app:s3cret@h1:26379,h2,h3:26380/2#mymaster",
            None,
        )
        .unwrap();
        assert_eq!(c.url.hosts, ["h1:26379", "h2:26379", "h3:26380"]);
        assert_eq!(c.master_name, "mymaster");
        assert_eq!(
            c.master_url("10.0.0.5:6379"),
            "redis://app:s3cret@10.0.0.5:6379/2"
        );
        assert_eq!(c.sentinel_url("h1:26379"), "redis://h1:26379/");
        let c = SentinelUrl::parse("rediss-sentinel://h1#m", Some(":pw")).unwrap();
        assert_eq!(c.master_url("h:1"), "rediss://h:1");
        assert_eq!(c.sentinel_url("h1:26379"), "rediss://:pw@h1:26379/");
        let c = SentinelUrl::parse("rediss-sentinel://h1/1?insecure#m", None).unwrap();
        assert_eq!(c.master_url("h:1"), "rediss://h:1/1#insecure");
        // A password with `/` (not percent-encoded) stays whole, and out of the hosts.
        let c = SentinelUrl::parse("redis-sentinel://u:se/cret@h1#m", None).unwrap();
        assert_eq!(c.url.hosts, ["h1:26379"]);
        let c = SentinelUrl::parse("redis-sentinel://[::1]:26379,[::1]#m", None).unwrap();
        assert_eq!(c.url.hosts, ["[::1]:26379", "[::1]:26379"]);
        for bad in [
            "redis-sentinel://h1:26379",
            "redis-sentinel://h1#",
            "redis-sentinel://h1:x#m",
            "redis-sentinel://h1,,h2#m",
            "redis-sentinel://h1/x#m",
            "redis://h1#m",
            "redis-sentinel://u:s3cret@h1:x#m",
            "redis-sentinel://u:s3/cret@h1/x#m",
        ] {
            let e = SentinelUrl::parse(bad, None).unwrap_err();
            assert!(!e.contains("s3cret") && !e.contains("cret"), "{e}");
        }
    }
}
