//! Where the command's Redis comes from: `--url` / `DISTLOCK_URL` or a default local server.

use std::time::Duration;

use anyhow::Result;
use distlock::{Client, ClientBuilder};

/// Connection options shared by every subcommand.
#[derive(Clone, Debug)]
pub struct Options {
    pub url: Option<String>,
    /// `--password`: the server's password, apart from the URL.
    pub password: Option<String>,
    /// `--sentinel-password`: the sentinels' password for a `redis-sentinel://` URL.
    pub sentinel_password: Option<String>,
    /// `--pubsub`: which pub/sub carries wake-ups on a Redis Cluster.
    pub pubsub: PubSub,
    /// `--tls-ca-cert`: the CA certificates' PEM (without it the library reads
    /// `$SSL_CERT_FILE`).
    pub tls_ca: Option<Vec<u8>>,
    pub key_prefix: String,
    pub watchdog_lease: Duration,
    /// `--connect-timeout`: bound on establishing a connection.
    pub connect_timeout: Duration,
    /// `--command-timeout`: bound on one command (resent up to three times).
    pub command_timeout: Duration,
}

/// `--pubsub`: [`distlock::PubSubMode`] on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PubSub {
    /// Sharded where the cluster's servers support it, classic otherwise.
    #[default]
    Auto,
    /// Classic pub/sub only.
    Classic,
    /// Sharded pub/sub only (Redis 7+).
    Sharded,
    /// Publish and listen both ways.
    Both,
}

impl From<PubSub> for distlock::PubSubMode {
    fn from(p: PubSub) -> Self {
        match p {
            PubSub::Auto => distlock::PubSubMode::Auto,
            PubSub::Classic => distlock::PubSubMode::Classic,
            PubSub::Sharded => distlock::PubSubMode::Sharded,
            PubSub::Both => distlock::PubSubMode::Both,
        }
    }
}

/// The URL used when none is given, for commands that talk to an existing server.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

impl Options {
    /// A client builder for `url` with these options (prefix, watchdog lease, timeouts).
    pub fn builder_for(&self, url: &str) -> ClientBuilder {
        let builder = Client::builder()
            .url(url)
            .key_prefix(self.key_prefix.clone())
            .watchdog_lease(self.watchdog_lease)
            .connect_timeout(self.connect_timeout)
            .command_timeout(self.command_timeout)
            .pubsub_mode(self.pubsub.into());
        let builder = match &self.tls_ca {
            Some(ca) => builder.tls_ca_cert(ca.clone()),
            None => builder,
        };
        let builder = match &self.password {
            Some(pw) => builder.password(pw),
            None => builder,
        };
        match &self.sentinel_password {
            Some(pw) => builder.sentinel_auth(None, pw),
            None => builder,
        }
    }

    /// A client for `url` with these options; common URL mistakes get a hint
    /// ([`check_url`]).
    pub async fn client_for(&self, url: &str) -> Result<Client> {
        check_url(url)?;
        self.connect(self.builder_for(url)).await
    }

    /// Build `builder`'s client. A failure says its cause, then the fix in the command's own
    /// terms (its flags and variables, [`cli_fix`]) where the library names one.
    pub async fn connect(&self, builder: ClientBuilder) -> Result<Client> {
        builder.build().await.map_err(|e| {
            // The library's message names the server with its password masked; its fix names
            // a ClientBuilder method: say the command's flag instead.
            match e.fix().and_then(cli_fix) {
                Some(fix) => {
                    anyhow::anyhow!("{:#}: {fix}", e.without_fix()).context("cannot connect")
                }
                None => anyhow::Error::new(e).context("cannot connect"),
            }
        })
    }

    /// A client for `--url`, or the default local server; a failure to use the default says
    /// how to name another.
    pub async fn client(&self) -> Result<Client> {
        match &self.url {
            Some(url) => self.client_for(url).await,
            None => self.client_for(DEFAULT_URL).await.map_err(|e| {
                e.context(format!(
                    "no --url given and DISTLOCK_URL not set, so the default {DEFAULT_URL} was \
                     tried (set --url or DISTLOCK_URL)"
                ))
            }),
        }
    }
}

/// A library [`distlock::Fix`] in the command's terms: its flags and variables.
/// `None` for a fix this command has no words of its own for (the library's are kept).
pub fn cli_fix(fix: distlock::Fix) -> Option<&'static str> {
    use distlock::Fix;
    Some(match fix {
        Fix::GivePassword => "give the password with --password or DISTLOCK_PASSWORD",
        Fix::CheckCredentials => {
            "check the password (--password or DISTLOCK_PASSWORD, or the URL's) and the URL's \
             user name"
        }
        Fix::RemovePassword => {
            "give no password (neither --password, DISTLOCK_PASSWORD nor one in the URL), or \
             set one on the server (requirepass)"
        }
        Fix::EncodePassword => {
            "give the password apart with --password or DISTLOCK_PASSWORD (as it is), or \
             percent-encode `@ : / ? # %` in the URL's password (%40 %3A %2F %3F %23 %25)"
        }
        Fix::TrustCa => {
            "give the CA that signed the server's certificate with --tls-ca-cert FILE \
             (DISTLOCK_TLS_CA_CERT, or $SSL_CERT_FILE), or skip the check with #insecure"
        }
        _ => return None,
    })
}

/// The URL schemes the library takes (redis-rs's own and distlock's Sentinel and Cluster
/// schemes).
const SCHEMES: [&str; 10] = [
    "redis",
    "rediss",
    "redis-sentinel",
    "rediss-sentinel",
    "redis-cluster",
    "rediss-cluster",
    "redis+unix",
    "unix",
    "valkey",
    "valkeys",
];

/// A clear error with a hint for URL mistakes the library would only call "invalid": an
/// empty URL, no scheme (`localhost:6379` → `use redis://localhost:6379`), a socket path,
/// `http://`, `tcp://`, another unknown scheme. A password in `url` is masked in the error.
pub fn check_url(url: &str) -> Result<()> {
    if url.trim().is_empty() {
        anyhow::bail!(
            "the server URL is empty: set --url or DISTLOCK_URL to redis://HOST[:PORT], or \
             unset DISTLOCK_URL to use the default {DEFAULT_URL}"
        );
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        let hint = if url.starts_with('/') {
            format!("unix://{url}")
        } else if let Some(rest) = SCHEMES.iter().find_map(|s| {
            // `redis:/host`: the scheme with its slashes mistyped.
            url.strip_prefix(s)
                .and_then(|r| r.strip_prefix(":/"))
                .map(|r| format!("{s}://{}", r.trim_start_matches('/')))
        }) {
            rest
        } else if url.contains('@') || looks_like_address(url) {
            format!("redis://{url}")
        } else {
            // Not an address: maybe a password put where the URL goes. Not shown.
            anyhow::bail!(
                "the server URL (--url or DISTLOCK_URL) has no scheme and is not shown (it \
                 does not look like HOST[:PORT], and may be a password put in the wrong \
                 place): use redis://HOST[:PORT], and --password or DISTLOCK_PASSWORD for the \
                 password"
            );
        };
        anyhow::bail!(
            "server URL {} has no scheme: use {}",
            mask(url),
            mask(&hint)
        );
    };
    if SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
        return Ok(());
    }
    let instead = match scheme.to_ascii_lowercase().as_str() {
        "http" | "tcp" => Some("redis"),
        "https" | "tls" | "ssl" => Some("rediss"),
        "sentinel" | "redis+sentinel" => Some("redis-sentinel"),
        "cluster" | "redis+cluster" => Some("redis-cluster"),
        _ => None,
    };
    let why = if scheme.to_ascii_lowercase().starts_with("http") {
        " (distlock speaks the Redis protocol, not HTTP)"
    } else {
        ""
    };
    match instead {
        Some(s) => anyhow::bail!(
            "server URL {} has the scheme {scheme}://{why}: use {}",
            mask(url),
            mask(&format!("{s}://{rest}"))
        ),
        None => anyhow::bail!(
            "server URL {} has the scheme {scheme}://, which distlock does not know: use one \
             of {}",
            mask(url),
            SCHEMES.map(|s| format!("{s}://")).join(", ")
        ),
    }
}

/// Whether `text` (given without a scheme) looks like `host:port` (numeric port), or a host
/// name with a dot or `localhost`, of host-name characters only: safe to quote. The library's
/// rule for its own messages.
fn looks_like_address(text: &str) -> bool {
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

/// `url` with its credentials and any `pass`/`password` query value masked, for messages
/// (the library's masking, as in its own errors).
fn mask(url: &str) -> String {
    distlock::redact_url(url)
}

#[cfg(test)]
mod tests {
    use super::{check_url, mask};

    fn hint(url: &str) -> String {
        format!("{:#}", check_url(url).unwrap_err())
    }

    #[test]
    fn urls_without_a_scheme_get_a_hint() {
        assert!(hint("localhost:6379").ends_with("use redis://localhost:6379"));
        assert!(hint("127.0.0.1:6379").ends_with("use redis://127.0.0.1:6379"));
        assert!(hint("redis:6379").ends_with("use redis://redis:6379"));
        assert!(hint("redis:/h:1").ends_with("use redis://h:1"));
        assert!(hint("/run/redis.sock").ends_with("use unix:///run/redis.sock"));
        assert!(hint("").contains("empty"));
        // Text that is no address may be a password: never quoted.
        for secret in ["hunter2", "s3cret!pw#x"] {
            let e = hint(secret);
            assert!(!e.contains(secret), "{e}");
            assert!(e.contains("--password"), "{e}");
        }
    }

    #[test]
    fn wrong_schemes_get_a_hint() {
        assert!(hint("http://h:6379").ends_with("use redis://h:6379"));
        assert!(hint("http://h:6379").contains("not HTTP"));
        assert!(hint("https://h").ends_with("use rediss://h"));
        assert!(hint("tcp://h:1").ends_with("use redis://h:1"));
        assert!(hint("foo://h").contains("redis-sentinel://"));
        for ok in [
            "redis://h",
            "REDIS://h",
            "rediss://h",
            "redis-sentinel://h#m",
            "redis-cluster://a,b",
            "unix:///s",
            "redis+unix:///s",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn hints_never_show_a_password() {
        for url in [
            "app:hunter2@h:6379",
            ":hunter2@h",
            "http://app:hunter2@h",
            "foo://:hunter2@h",
            "tcp://h?password=hunter2",
        ] {
            let e = hint(url);
            assert!(!e.contains("hunter2"), "{url}: {e}");
            assert!(e.contains("***"), "{url}: {e}");
        }
        assert_eq!(mask("app:pw@h"), "app:***@h");
        assert_eq!(mask("redis://h/?db=1&pass=pw"), "redis://h/?db=1&pass=***");
        assert_eq!(mask("redis://h:1"), "redis://h:1");
    }
}
