//! A TCP proxy per server, in process (tokio): delays, blackholes or cuts connections in
//! either direction.
//!
//! `tc netem` needs root and a network namespace; this proxy needs neither. Clients connect to
//! [`Proxy::addr`] instead of the server; each accepted connection gets its own upstream
//! connection, and bytes are pumped both ways through a [`Fault`] that can be changed at any
//! moment with [`Proxy::set`].

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// Which bytes a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client → server (requests).
    ToServer,
    /// Server → client (replies, pub/sub messages).
    ToClient,
    /// Both ways.
    Both,
}

impl Direction {
    fn covers(self, way: Direction) -> bool {
        self == Direction::Both || self == way
    }
}

/// A network fault. It applies to bytes read after [`Proxy::set`], on existing and new
/// connections alike; bytes already queued keep their delay and their order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fault {
    /// Forward everything at once.
    #[default]
    None,
    /// Hold every byte going this way for the duration (from when the proxy reads it) before
    /// forwarding it. Order is kept; the other way is not slowed.
    Delay(Direction, Duration),
    /// Drop every byte going this way, for good: the connections stay open and nothing is
    /// sent or closed (a close or reset from that side is held until the blackhole ends). New
    /// connections are accepted but their bytes are dropped too. The streams are out of sync
    /// once it ends, as after a real partition: heal with [`Proxy::heal_and_cut`].
    Blackhole(Direction),
    /// Cut every open connection (see [`Proxy::cut`]) and reset new ones right after accept.
    Refuse,
}

impl Fault {
    /// How long bytes going `way` are held: `None` = dropped.
    fn hold(&self, way: Direction) -> Option<Duration> {
        match *self {
            Fault::Delay(dir, d) if dir.covers(way) => Some(d),
            Fault::Blackhole(dir) if dir.covers(way) => None,
            _ => Some(Duration::ZERO),
        }
    }
}

/// A proxy listening on 127.0.0.1 in front of one upstream server. Cheap to clone (one shared
/// state); dropping the last clone stops listening and cuts every connection.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

struct Shared {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    /// Bumped by every cut; each connection closes when it changes (or the sender drops).
    cuts: watch::Sender<u64>,
    #[cfg_attr(not(test), allow(dead_code))] // read by `connections`, which the tests use
    open: Arc<AtomicUsize>,
    listener: AbortHandle,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1 and forward every accepted connection to
    /// `upstream`. The accept loop is spawned on the current tokio runtime.
    ///
    /// # Errors
    /// When the listening socket cannot be bound.
    pub async fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (fault, fault_rx) = watch::channel(Fault::None);
        let (cuts, cuts_rx) = watch::channel(0);
        let open = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(accept_loop(
            listener,
            upstream,
            fault_rx,
            cuts_rx,
            open.clone(),
        ));
        let listener = task.abort_handle();
        Ok(Proxy {
            shared: Arc::new(Shared {
                addr,
                fault,
                cuts,
                open,
                listener,
            }),
        })
    }

    /// The proxy's listening port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.shared.addr.port()
    }

    /// The proxy's listening address (127.0.0.1 and [`Proxy::port`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The current fault.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn fault(&self) -> Fault {
        *self.shared.fault.borrow()
    }

    /// Replace the current fault, on existing and new connections at once. [`Fault::Refuse`]
    /// also cuts every open connection.
    pub fn set(&self, fault: Fault) {
        self.shared.fault.send_replace(fault);
        if fault == Fault::Refuse {
            self.cut();
        }
    }

    /// Forward everything again (`set(Fault::None)`). After a [`Fault::Blackhole`] the open
    /// streams have lost bytes: use [`Proxy::heal_and_cut`] unless that is the point.
    pub fn heal(&self) {
        self.set(Fault::None);
    }

    /// [`Proxy::heal`], then [`Proxy::cut`]: clients reconnect to a clean stream.
    pub fn heal_and_cut(&self) {
        self.heal();
        self.cut();
    }

    /// Reset (RST, `SO_LINGER` 0) both sides of every open connection; queued bytes are lost.
    /// New connections are accepted as the fault says. Asynchronous: each connection closes
    /// on its task's next wake-up; [`Proxy::connections`] counts down as they do.
    pub fn cut(&self) {
        self.shared.cuts.send_modify(|n| *n += 1);
    }

    /// Open proxied connections now (accepted and not yet closed).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

/// Counts one open connection while alive.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(count: &Arc<AtomicUsize>) -> Open {
        count.fetch_add(1, Ordering::SeqCst);
        Open(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    fault: watch::Receiver<Fault>,
    mut cuts: watch::Receiver<u64>,
    open: Arc<AtomicUsize>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // Out of file descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if *fault.borrow() == Fault::Refuse {
            let _ = client.set_zero_linger();
            continue;
        }
        // The new connection only sees cuts from now on.
        cuts.borrow_and_update();
        let open = Open::new(&open);
        tokio::spawn(serve(client, upstream, fault.clone(), cuts.clone(), open));
    }
}

/// One proxied connection, until both sides close, either fails, or a cut.
async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    fault: watch::Receiver<Fault>,
    mut cuts: watch::Receiver<u64>,
    _open: Open,
) {
    let server = tokio::select! {
        server = TcpStream::connect(upstream) => server,
        _ = cuts.changed() => Err(io::ErrorKind::ConnectionAborted.into()),
    };
    let Ok(server) = server else {
        let _ = client.set_zero_linger();
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let reset = tokio::select! {
        r = async {
            tokio::try_join!(
                pump(&mut cr, &mut sw, Direction::ToServer, fault.clone()),
                pump(&mut sr, &mut cw, Direction::ToClient, fault),
            )
        } => r.is_err(),
        _ = cuts.changed() => true,
    };
    if reset {
        let _ = (cw.as_ref().set_zero_linger(), sw.as_ref().set_zero_linger());
    }
}

/// Copy `src` to `dst` through the fault for `way`. A reader and a writer joined by a queue,
/// so a delayed write does not stop reading. `Ok` after EOF was forwarded as a shutdown.
async fn pump(
    src: &mut OwnedReadHalf,
    dst: &mut OwnedWriteHalf,
    way: Direction,
    mut fault: watch::Receiver<Fault>,
) -> io::Result<()> {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(64);
    let read = async move {
        let mut buf = vec![0; 16 * 1024];
        let end = loop {
            let n = match src.read(&mut buf).await {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            let Some(d) = fault.borrow().hold(way) else {
                continue;
            };
            let item = (Instant::now() + d, buf[..n].to_vec());
            if tx.send(item).await.is_err() {
                break Ok(()); // The writer failed; its error ends the pump.
            }
        };
        // A blackhole drops the close (FIN or RST) too, until it ends or the proxy is dropped.
        let _ = fault.wait_for(|f| f.hold(way).is_some()).await;
        end
    };
    let write = async {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            dst.write_all(&bytes).await?;
        }
        dst.shutdown().await
    };
    tokio::try_join!(read, write).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use distlock_test::RedisServer;
    use tokio::time::timeout;

    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

    async fn setup() -> (RedisServer, Proxy) {
        let server = RedisServer::start();
        let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], server.port())))
            .await
            .expect("proxy starts");
        (server, proxy)
    }

    /// One PING round trip on a raw connection, bounded by `limit` (then `TimedOut`).
    async fn ping(stream: &mut TcpStream, limit: Duration) -> io::Result<()> {
        let round_trip = async {
            stream.write_all(PING).await?;
            let mut reply = [0; 7];
            stream.read_exact(&mut reply).await?;
            match &reply {
                b"+PONG\r\n" => Ok(()),
                _ => Err(io::Error::other(format!("reply {reply:?}"))),
            }
        };
        timeout(limit, round_trip)
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
    }

    async fn connect_and_ping(addr: SocketAddr, limit: Duration) -> io::Result<TcpStream> {
        let mut stream = TcpStream::connect(addr).await?;
        ping(&mut stream, limit).await?;
        Ok(stream)
    }

    async fn eventually(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(5), "never: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    const SEC: Duration = Duration::from_secs(1);
    const SHORT: Duration = Duration::from_millis(300);

    #[tokio::test(flavor = "multi_thread")]
    async fn passes_through_and_counts() {
        let (_server, proxy) = setup().await;
        assert_eq!(
            proxy.addr(),
            SocketAddr::from(([127, 0, 0, 1], proxy.port()))
        );
        let a = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        let b = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        assert_eq!(proxy.connections(), 2);
        // A real client through it.
        let client = redis::Client::open(format!("redis://{}/", proxy.addr())).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut con)
            .await
            .unwrap();
        let v: String = redis::cmd("GET")
            .arg("k")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(v, "v");
        assert_eq!(proxy.connections(), 3);
        drop((a, b, con, client));
        eventually("all closed", || proxy.connections() == 0).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn delay_holds_each_direction() {
        let (_server, proxy) = setup().await;
        let mut old = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        proxy.set(Fault::Delay(Direction::Both, Duration::from_millis(200)));
        for stream in [
            &mut old,
            &mut TcpStream::connect(proxy.addr()).await.unwrap(),
        ] {
            let start = Instant::now();
            ping(stream, 2 * SEC).await.unwrap();
            let took = start.elapsed();
            assert!(
                took >= Duration::from_millis(400) && took < 2 * SEC,
                "{took:?}"
            );
        }
        proxy.set(Fault::Delay(
            Direction::ToClient,
            Duration::from_millis(200),
        ));
        let start = Instant::now();
        ping(&mut old, 2 * SEC).await.unwrap();
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(200) && took < Duration::from_millis(400) + SEC);
        proxy.heal();
        ping(&mut old, SEC).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn blackhole_drops_bytes_and_keeps_connections() {
        let (server, proxy) = setup().await;
        let mut old = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        proxy.set(Fault::Blackhole(Direction::ToServer));
        let err = ping(&mut old, SHORT).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // New connections are accepted, and black-holed too; the server itself is fine.
        let err = connect_and_ping(proxy.addr(), SHORT).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        connect_and_ping(SocketAddr::from(([127, 0, 0, 1], server.port())), SEC)
            .await
            .unwrap();
        assert_eq!(proxy.connections(), 2);

        // The other way: the server runs the command, the client never hears back.
        proxy.set(Fault::Blackhole(Direction::ToClient));
        let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
        new.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
            .await
            .unwrap();
        let mut buf = [0; 16];
        assert!(timeout(SHORT, new.read(&mut buf)).await.is_err());
        let mut direct = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let v: String = redis::cmd("GET")
            .arg("k")
            .query_async(&mut direct)
            .await
            .unwrap();
        assert_eq!(v, "v");

        proxy.heal_and_cut();
        eventually("cut", || proxy.connections() == 0).await;
        assert!(ping(&mut old, SEC).await.is_err());
        connect_and_ping(proxy.addr(), SEC).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn cut_closes_open_connections_only() {
        let (_server, proxy) = setup().await;
        let mut old = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        proxy.cut();
        eventually("cut", || proxy.connections() == 0).await;
        let err = ping(&mut old, SEC).await.unwrap_err();
        assert_ne!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        let mut new = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        assert_eq!(proxy.connections(), 1);
        // Dropping the last handle cuts too (asynchronously).
        let (open, addr) = (proxy.shared.open.clone(), proxy.addr());
        drop(proxy);
        eventually("dropped", || open.load(Ordering::SeqCst) == 0).await;
        assert!(ping(&mut new, SEC).await.is_err());
        assert!(connect_and_ping(addr, SEC).await.is_err());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn refuse_then_heal() {
        let (_server, proxy) = setup().await;
        let mut old = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        proxy.set(Fault::Refuse);
        assert_eq!(proxy.fault(), Fault::Refuse);
        eventually("cut", || proxy.connections() == 0).await;
        assert_ne!(
            ping(&mut old, SEC).await.unwrap_err().kind(),
            io::ErrorKind::TimedOut
        );
        let err = connect_and_ping(proxy.addr(), SEC).await.unwrap_err();
        assert_ne!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert_eq!(proxy.connections(), 0);
        proxy.heal();
        // Kept open while counted: a dropped connection leaves the count at once.
        let _new = connect_and_ping(proxy.addr(), SEC).await.unwrap();
        assert_eq!(proxy.connections(), 1);
    }
}
