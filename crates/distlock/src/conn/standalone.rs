//! A standalone server (`redis://`, `rediss://`): one multiplexed command connection that
//! reconnects with backoff (redis-rs `ConnectionManager`), and subscriptions on plain pub/sub
//! connections to the same server.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::naming;
use super::ConnectSettings;

/// One server: its command connection, and the client its pub/sub connections open with.
/// Cheap to clone (shared handles).
#[derive(Clone)]
pub(crate) struct Server {
    pub(crate) manager: ConnectionManager,
    pub(crate) client: Arc<redis::Client>,
    /// The server's clock as its grants last read it (plain-lock grants that need not read
    /// it themselves).
    pub(crate) clock: Arc<ServerClock>,
}

impl Server {
    /// Open the command connection to the server of `client` (the caller bounds the whole
    /// connect), and name it (`CLIENT SETNAME`, see `naming.rs`).
    pub(crate) async fn connect(
        client: redis::Client,
        settings: &ConnectSettings,
    ) -> redis::RedisResult<Server> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(2));
        let mut manager = client.get_connection_manager_with_config(config).await?;
        naming::set_name(&mut manager, &settings.client_name).await;
        Ok(Server {
            manager,
            client: Arc::new(client),
            clock: Arc::default(),
        })
    }
}

/// The longest a clock reading stands for the server's clock: after it, a grant reads `TIME`
/// again (and so gives the next reading).
pub(crate) const CLOCK_READING_LIFE: Duration = Duration::from_millis(200);

/// The server's clock, as a fast-path grant of a plain lock last read it (`TIME`, its token),
/// for the grants after it, which then need not read it themselves: `TIME` is 7,000 of the
/// 55,000 instructions a grant costs the server.
///
/// What a grant may take for the clock must never be later than the server's own clock: its
/// token is that value, and tokens must rise across a restart from an older snapshot, which
/// loses the counter's later values and leaves only the clock above them (see prelude.lua's
/// `next_token`). So an estimate is the reading plus the time passed since its reply
/// arrived (the server read its clock before it answered) less 0.1 % of it (a local clock
/// that runs up to 1,000 ppm faster than the server's), and a lower bound of the server's
/// clock. A token from it is at most [`CLOCK_READING_LIFE`] plus a round trip behind the
/// clock; the assumption this rests on: a server restarted from an older snapshot was down
/// longer than that (a process restart and an RDB load take longer), so its clock is past
/// every token issued before it stopped. A failed request (the connection broken, as a
/// restart breaks it) drops the reading, so the grants after it read `TIME` again.
#[derive(Debug, Default)]
pub(crate) struct ServerClock {
    /// The latest reading in microseconds since the epoch, and when its reply arrived.
    reading: std::sync::Mutex<Option<(u64, tokio::time::Instant)>>,
}

impl ServerClock {
    /// A grant read the server's clock as `us` (microseconds since the epoch); its reply
    /// arrived at `arrived`.
    pub(crate) fn read(&self, us: u64, arrived: tokio::time::Instant) {
        *self.reading.lock().unwrap() = Some((us, arrived));
    }

    /// Forget the reading (a request failed: the server may have restarted).
    pub(crate) fn forget(&self) {
        *self.reading.lock().unwrap() = None;
    }

    /// The server's clock now, no later than it, in microseconds; `None` without a reading
    /// or past its life.
    pub(crate) fn estimate(&self) -> Option<u64> {
        let reading = *self.reading.lock().unwrap();
        let (us, arrived) = reading?;
        estimate(
            us,
            tokio::time::Instant::now().saturating_duration_since(arrived),
        )
    }
}

/// A reading of `us` microseconds whose reply arrived `since` ago, as the server's clock
/// now: the reading plus 99.9 % of `since`; `None` past [`CLOCK_READING_LIFE`].
fn estimate(us: u64, since: Duration) -> Option<u64> {
    if since > CLOCK_READING_LIFE {
        return None;
    }
    let passed = since.as_micros() as u64;
    Some(us + passed - passed / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An estimate is the reading plus the time passed, less 0.1 % of it (never later than
    /// the server's clock, whose reading came before its reply), and none once the reading
    /// is older than its life.
    #[test]
    fn an_estimate_stays_behind_the_servers_clock_and_lives_200_ms() {
        let s = 1_764_400_000_000_000u64;
        for (since_us, want) in [
            (0, Some(s)),
            (1_000, Some(s + 999)),
            (100_000, Some(s + 99_900)),
            (200_000, Some(s + 199_800)),
            (200_001, None),
            (5_000_000, None),
        ] {
            assert_eq!(
                estimate(s, Duration::from_micros(since_us)),
                want,
                "{since_us} us"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_forgotten_reading_gives_no_estimate() {
        let clock = ServerClock::default();
        assert_eq!(clock.estimate(), None);
        clock.read(1_000_000, tokio::time::Instant::now());
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(clock.estimate(), Some(1_000_000 + 10_000 - 10));
        clock.forget();
        assert_eq!(clock.estimate(), None);
    }
}
