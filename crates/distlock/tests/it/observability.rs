//! Tracing spans: what a reader of the traces sees of acquires, releases, extensions and
//! watchdog renewals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::util::*;
use distlock::Lease;

/// A closed span: its name and fields (as text).
type Closed = (String, HashMap<String, String>);

/// Collects every closed span with its fields.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<Closed>>>);

struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Collector {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(HashMap::new());
        attrs.record(&mut fields);
        fields
            .0
            .insert("level".into(), attrs.metadata().level().to_string());
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let mut ext = span.extensions_mut();
        values.record(ext.get_mut::<Fields>().unwrap());
    }

    /// Events are collected like closed spans, by their name (`distlock.lease_lost`).
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields(HashMap::new());
        event.record(&mut fields);
        fields
            .0
            .insert("level".into(), event.metadata().level().to_string());
        self.0
            .lock()
            .unwrap()
            .push((event.metadata().name().to_string(), fields.0));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).unwrap();
        let fields = span.extensions_mut().remove::<Fields>().unwrap().0;
        self.0
            .lock()
            .unwrap()
            .push((span.name().to_string(), fields));
    }
}

impl Collector {
    /// The spans and events above DEBUG with a field whose value is `value`.
    fn above_debug(&self, value: &str) -> Vec<Closed> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, f)| {
                !matches!(f.get("level").map(String::as_str), Some("DEBUG" | "TRACE"))
                    && f.iter().any(|(k, v)| k != "level" && v == value)
            })
            .cloned()
            .collect()
    }

    /// The closed spans called `name` whose fields include every pair of `with`.
    fn find(&self, name: &str, with: &[(&str, &str)]) -> Vec<HashMap<String, String>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, f)| {
                n == name
                    && with
                        .iter()
                        .all(|(k, v)| f.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, f)| f.clone())
            .collect()
    }
}

/// Acquire, extend, release, a refused attempt, a semaphore permit and a watchdog renewal
/// each leave a span with the fields the README lists: kind, name, owner, outcome, waited
/// time, the fencing token of a grant.
#[tokio::test(flavor = "current_thread")]
async fn spans_carry_kind_name_owner_token_and_outcome() {
    // Spans of other tests land here too; the names below are this test's own.
    let collector = &recorded().0;

    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let lock = client.lock("traced");
    let guard = lock.acquire().await.unwrap();
    let token = guard.fencing_token().to_string();
    let owner = guard.owner().to_string();
    assert!(client.lock("traced").try_acquire().await.unwrap().is_none());
    // Let the watchdog renew (every 100 ms), then extend and release.
    tokio::time::sleep(Duration::from_millis(350)).await;
    guard.extend(Duration::from_secs(5)).await.unwrap();
    guard.release().await.unwrap();
    // An explicit lease that runs out: one `distlock.lease_lost` event, however often the
    // loss is observed.
    let short = client
        .lock("traced-short")
        .lease(Duration::from_millis(50))
        .acquire()
        .await
        .unwrap();
    short.lost().await;
    assert!(short.is_lost());
    drop(short);
    // A loss nobody looked at is found by the release itself.
    let expired = client
        .lock("traced-expired")
        .lease(Duration::from_millis(50))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(expired.release().await.is_err());
    // An acquire of a lock this client holds warns as soon as it waits (a Redisson habit:
    // nested lock() calls); another client's wait does not.
    let held = client.lock("traced-nested").acquire().await.unwrap();
    let nested = client
        .lock("traced-nested")
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap();
    assert!(nested.is_none());
    let other = client_for(&server).await;
    assert!(other
        .lock("traced-nested")
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    held.release().await.unwrap();
    // Two tasks of one client contending (a web service's per-user lock) is ordinary
    // contention: nothing above DEBUG, whichever task holds the lock.
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn({
        let client = client.clone();
        async move {
            let guard = client.lock("traced-contended").acquire().await.unwrap();
            held_tx.send(()).unwrap();
            release_rx.await.unwrap();
            guard.release().await.unwrap();
        }
    });
    held_rx.await.unwrap();
    let waiter = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .lock("traced-contended")
                .try_acquire_for(Duration::from_millis(100))
                .await
        }
    });
    assert!(waiter.await.unwrap().unwrap().is_none());
    assert!(client
        .lock("traced-contended")
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    release_tx.send(()).unwrap();
    holder.await.unwrap();
    // A scheduled job's error is reported by the schedule, with the job's name.
    let failing = distlock::spawn_every_with(
        client
            .job_lock("traced-job")
            .at_most_for(Duration::from_secs(5)),
        Duration::from_millis(100),
        |_lease| async { Err::<(), _>("disk full") },
    );
    assert!(
        eventually(Duration::from_secs(5), || !collector
            .find("distlock.job_failed", &[("job", "traced-job")])
            .is_empty())
        .await,
        "no distlock.job_failed event"
    );
    failing.abort();
    let sem = client.semaphore("traced-sem");
    sem.try_set_permits(1).await.unwrap();
    sem.acquire().await.unwrap().release().await.unwrap();
    // One of each other kind, whose spans must name it as `distlock::kind` does.
    let fair = client
        .fair_lock("traced-kind-fair")
        .acquire()
        .await
        .unwrap();
    fair.release().await.unwrap();
    let rw = client.rw_lock("traced-kind-rw");
    rw.read().await.unwrap().release().await.unwrap();
    rw.write().await.unwrap().release().await.unwrap();
    let leased = client.leased_semaphore("traced-kind-leased");
    leased.try_set_permits(1).await.unwrap();
    leased.acquire().await.unwrap().release().await.unwrap();
    let job = client
        .job_lock("traced-kind-job")
        .at_most_for(Duration::from_secs(5))
        .try_acquire()
        .await
        .unwrap()
        .expect("a free job lock");
    job.release().await.unwrap();
    let latch = client.count_down_latch("traced-kind-latch");
    latch.try_set_count(1).await.unwrap();
    assert!(!latch.wait_for(Duration::from_millis(50)).await.unwrap());

    let granted = collector.find(
        "distlock.acquire",
        &[("kind", "lock"), ("name", "traced"), ("outcome", "granted")],
    );
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!(granted[0]["token"], token);
    // One span per request: DEBUG, so `RUST_LOG=info` with span events logs none of them.
    assert_eq!(granted[0]["level"], "DEBUG", "{granted:?}");
    assert_eq!(granted[0]["owner"], owner);
    assert!(
        granted[0]["waited_ms"].parse::<u64>().is_ok(),
        "{granted:?}"
    );
    let refused = collector.find(
        "distlock.acquire",
        &[("name", "traced"), ("outcome", "not_acquired")],
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_ne!(refused[0]["owner"], owner);
    let extended = collector.find(
        "distlock.extend",
        &[
            ("name", "traced"),
            ("owner", &owner),
            ("outcome", "extended"),
        ],
    );
    assert_eq!(extended.len(), 1);
    let released = collector.find(
        "distlock.release",
        &[
            ("name", "traced"),
            ("owner", &owner),
            ("outcome", "ok"),
            ("give_back", "false"),
        ],
    );
    assert_eq!(released.len(), 1);
    assert_eq!(released[0]["level"], "DEBUG", "{released:?}");
    assert!(!collector
        .find("distlock.renew", &[("outcome", "renewed"), ("lost", "0")])
        .is_empty());
    assert_eq!(
        collector
            .find(
                "distlock.acquire",
                &[
                    ("kind", "semaphore"),
                    ("name", "traced-sem"),
                    ("outcome", "granted")
                ],
            )
            .len(),
        1
    );
    // One vocabulary: every kind's acquire span carries the name of `distlock::kind`, the
    // label of its metrics and the CLI's KIND (see `names::`).
    use distlock::kind;
    for (name, kinds) in [
        ("traced", &[kind::LOCK][..]),
        ("traced-sem", &[kind::SEMAPHORE]),
        ("traced-kind-fair", &[kind::FAIR_LOCK]),
        ("traced-kind-rw", &[kind::READ_LOCK, kind::WRITE_LOCK]),
        ("traced-kind-leased", &[kind::LEASED_SEMAPHORE]),
        ("job-lock:default:traced-kind-job", &[kind::JOB_LOCK]),
        ("traced-kind-latch", &[kind::LATCH]),
    ] {
        let mut seen: Vec<String> = collector
            .find("distlock.acquire", &[("name", name)])
            .into_iter()
            .map(|f| f["kind"].clone())
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, kinds, "the acquire spans of {name}");
    }
    let lost = collector.find(
        "distlock.lease_lost",
        &[("kind", "lock"), ("what", "traced-short")],
    );
    assert_eq!(lost.len(), 1, "{lost:?}");
    let lost = collector.find(
        "distlock.lease_lost",
        &[("kind", "lock"), ("what", "traced-expired")],
    );
    assert_eq!(lost.len(), 1, "{lost:?}");
    let failed = collector.find("distlock.job_failed", &[("job", "traced-job")]);
    assert_eq!(failed[0]["error"], "disk full", "{failed:?}");
    assert_eq!(failed[0]["level"], "WARN", "{failed:?}");
    let warned = collector.find(
        "distlock.waiting_for_own_lock",
        &[("lock", "traced-nested")],
    );
    assert_eq!(
        warned.len(),
        1,
        "once, for this client's wait only: {warned:?}"
    );
    assert!(warned[0]["message"].contains("reenter"), "{warned:?}");
    let loud = collector.above_debug("traced-contended");
    assert!(loud.is_empty(), "contention logged above DEBUG: {loud:?}");

    // A user whose ACL denies the client's notice channel: one WARN at connect that says
    // what is lost (force-unlock notices), not the wake-ups it keeps.
    acl_user(
        &server,
        "nonotice",
        &["~*", "&redisson_lock__channel:*", "+@all"],
    );
    let _deaf =
        distlock::Client::connect(&server.url().replace("redis://", "redis://nonotice:pw@"))
            .await
            .unwrap();
    let denied = |needle: &'static str| {
        let collector = collector.clone();
        move || {
            collector.0.lock().unwrap().iter().any(|(_, f)| {
                f.get("level").map(String::as_str) == Some("WARN")
                    && f.get("message").is_some_and(|m| m.contains(needle))
                    && f.get("error")
                        .is_some_and(|e| e.contains("distlock_client:"))
            })
        }
    };
    assert!(
        eventually(Duration::from_secs(5), denied("no lost-lease notices")).await,
        "no WARN naming the lost notices"
    );
    assert!(!denied("no wake-ups")(), "the WARN speaks of wake-ups");
}

/// The process-wide subscriber of this file's tests, installed once: a thread-scoped one
/// races with the other tests' threads over tracing's per-callsite interest cache (a
/// callsite first met on a thread without a subscriber is cached as never enabled).
fn recorded() -> &'static (Collector, Parents) {
    static RECORDED: std::sync::OnceLock<(Collector, Parents)> = std::sync::OnceLock::new();
    RECORDED.get_or_init(|| {
        let (collector, parents) = (Collector::default(), Parents::default());
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry()
                .with(collector.clone())
                .with(parents.clone()),
        )
        .expect("no other test installs a global subscriber");
        (collector, parents)
    })
}

/// An event's message (or name), the span it was logged in (`None`: outside any span) and
/// the thread that logged it.
type Logged = (String, Option<String>, std::thread::ThreadId);

/// Every event with the span it was logged in.
#[derive(Clone, Default)]
struct Parents(Arc<Mutex<Vec<Logged>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Parents {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(HashMap::new());
        event.record(&mut fields);
        let what = fields
            .0
            .remove("message")
            .unwrap_or_else(|| event.metadata().name().to_string());
        let parent = ctx.event_span(event).map(|s| s.name().to_string());
        let thread = std::thread::current().id();
        self.0.lock().unwrap().push((what, parent, thread));
    }
}

/// What an acquire or a release logs while it runs is logged in its span: a nested
/// acquire's warning in `distlock.acquire`, a release's resend (its first send unanswered)
/// in `distlock.release`.
#[tokio::test(flavor = "current_thread")]
async fn an_acquires_and_a_releases_events_are_in_their_spans() {
    // Other tests log here too: this test's events are those of its own thread (a
    // current-thread runtime).
    let parents = &recorded().1;
    let this = std::thread::current().id();
    let server = RedisServer::start();
    let client = quick_client(&server).await;
    let held = client.lock("spanned").acquire().await.unwrap();
    let nested = client
        .lock("spanned")
        .try_acquire_for(Duration::from_millis(50))
        .await
        .unwrap();
    assert!(nested.is_none());
    let _: () = cmd(&server, &["CLIENT", "PAUSE", "900", "ALL"]);
    // The first send goes unanswered; its resend finds the lock gone.
    let _ = held.release().await;
    let events: Vec<Logged> = parents
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, thread)| *thread == this)
        .cloned()
        .collect();
    let in_span = |needle: &str| -> Vec<Option<String>> {
        events
            .iter()
            .filter(|(what, _, _)| what.contains(needle))
            .map(|(_, parent, _)| parent.clone())
            .collect()
    };
    let warned = in_span("waiting for a lock this task holds");
    assert!(!warned.is_empty(), "{events:?}");
    assert!(
        warned
            .iter()
            .all(|p| p.as_deref() == Some("distlock.acquire")),
        "{warned:?}"
    );
    let resent = in_span("resending");
    assert!(!resent.is_empty(), "{events:?}");
    assert!(
        resent
            .iter()
            .all(|p| p.as_deref() == Some("distlock.release")),
        "{resent:?}"
    );
}
