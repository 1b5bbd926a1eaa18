//! Real `redis-server` processes on free loopback ports, for tests of services that use
//! distlock, and for distlock's own tests, its `demo` and its `bench`.
//!
//! Every server is a child process started from the `redis-server` binary named by the
//! `DISTLOCK_REDIS_SERVER` environment variable, or found on `PATH`. A missing binary is a
//! loud failure that says what to install; nothing here ever skips silently. Servers bind to
//! `127.0.0.1` only, keep their files in a private temporary directory, and are killed when
//! their handle drops — or, on Linux, when the thread that started them ends.
//!
//! The shape follows redis-rs's `redis-test` crate (`RedisServer`): pick a free port, spawn,
//! poll with `PING` until the server answers.
//!
//! [`testing`] has the helpers tests use on such a server: run a command, list keys and
//! subscribers, wait for a condition. [`sentinel`] starts a master, two replicas and three
//! Redis Sentinels watching them ([`SentinelSet`]), for failover tests. [`cluster`] starts a
//! Redis Cluster of three masters with one replica each ([`ClusterSet`]).

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cluster;
pub mod sentinel;
pub mod testing;

pub use cluster::ClusterSet;
pub use sentinel::SentinelSet;

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What to tell a person whose machine has no `redis-server`.
pub const INSTALL_HINT: &str = "redis-server was not found: install it with \
`sudo apt-get install redis-server redis-tools` (Debian/Ubuntu), or point \
DISTLOCK_REDIS_SERVER at a redis-server (or valkey-server) binary";

/// How long a server may take to answer its first `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Poll `ready` every `poll` until it returns `Ok` (it returns `Err` with what it saw);
/// at `deadline` panic with `failure(last thing seen)`. Shared by the multi-server sets'
/// waits.
pub(crate) fn poll_until<T>(
    poll: Duration,
    deadline: Instant,
    mut ready: impl FnMut() -> Result<T, String>,
    failure: impl FnOnce(String) -> String,
) -> T {
    loop {
        let seen = match ready() {
            Ok(done) => return done,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            panic!("{}", failure(seen));
        }
        thread::sleep(poll);
    }
}

/// Run `cmd` (described by `what` in errors) on `server`, connecting and reading with
/// `timeout`; any failure (including a server that is not running) is returned as text.
/// Shared by the multi-server sets' polls.
pub(crate) fn query_with_timeout<T: redis::FromRedisValue>(
    server: &RedisServer,
    what: &str,
    cmd: &redis::Cmd,
    timeout: Duration,
) -> Result<T, String> {
    if server.pid().is_none() {
        return Err(format!("port {}: not running", server.port()));
    }
    let fail = |e: redis::RedisError| format!("{what} on port {}: {e}", server.port());
    let client = redis::Client::open(server.url()).map_err(fail)?;
    let mut con = client.get_connection_with_timeout(timeout).map_err(fail)?;
    con.set_read_timeout(Some(timeout)).map_err(fail)?;
    con.set_write_timeout(Some(timeout)).map_err(fail)?;
    cmd.query(&mut con).map_err(fail)
}

/// `args[0]` with the arguments `args[1..]` as a command.
pub(crate) fn command(args: &[&str]) -> redis::Cmd {
    let (name, rest) = args.split_first().expect("no command given");
    let mut cmd = redis::cmd(name);
    for a in rest {
        cmd.arg(*a);
    }
    cmd
}

/// The `redis-server` binary: `$DISTLOCK_REDIS_SERVER`, else `redis-server` on `PATH`.
///
/// # Errors
/// Returns an error whose message is [`INSTALL_HINT`] when no binary can be found.
pub fn redis_server_binary() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os("DISTLOCK_REDIS_SERVER") {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "DISTLOCK_REDIS_SERVER={} is not a file; {INSTALL_HINT}",
                path.display()
            ),
        ));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join("redis-server");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(io::ErrorKind::NotFound, INSTALL_HINT))
}

/// A free TCP port on 127.0.0.1, as the kernel hands it out for port 0.
///
/// There is a window between this call and the server's bind in which another process may
/// take the port; [`RedisServer::start`] retries on a fresh port when that happens.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// A free port `p` with `p + 10000` free as well, both on 127.0.0.1.
fn port_with_bus_above() -> u16 {
    loop {
        let p = free_port();
        if p <= u16::MAX - 10_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
}

/// The major version of the `redis-server` (or `valkey-server`) binary the harness runs, from
/// its `--version` line (`… v=7.0.15 …`); 0 when it cannot be read.
pub fn server_major_version() -> u32 {
    static MAJOR: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MAJOR.get_or_init(|| {
        let Ok(binary) = redis_server_binary() else {
            return 0;
        };
        let Ok(out) = Command::new(binary).arg("--version").output() else {
            return 0;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    })
}

/// Options for a [`RedisServer`]: extra `redis-server` arguments, a password, persistence.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    password: Option<String>,
    persistent: bool,
    tls: bool,
    sentinel_config: Option<String>,
    extra_args: Vec<String>,
    /// A data port whose default cluster bus port (+ 10000) is free too (a Redis before 7.0
    /// cluster node, which has no `--cluster-port`).
    bus_above: bool,
}

impl ServerOptions {
    /// Require this password (`--requirepass`).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Keep an RDB snapshot (`dump.rdb`) in the server's directory, written on `SAVE` and
    /// loaded on [`RedisServer::restart`]. Off by default (`--save ''`).
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// Serve TLS only, with a self-signed certificate for 127.0.0.1 made by the `openssl`
    /// command; [`RedisServer::url`] is then `rediss://…/#insecure` (no certificate check).
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Run as a Redis Sentinel (`redis-server <dir>/sentinel.conf --sentinel`), with `config`
    /// (lines such as `sentinel monitor <name> 127.0.0.1 <port> 2`) as its configuration
    /// file, written into the server's directory. The sentinel rewrites that file as it
    /// learns; [`RedisServer::restart`] keeps the rewritten file, as a real restart would.
    /// [`SentinelSet`] uses this; the other options still apply (a sentinel ignores
    /// [`persistent`](Self::persistent)).
    pub fn sentinel(mut self, config: impl Into<String>) -> Self {
        self.sentinel_config = Some(config.into());
        self
    }

    /// Pass one more argument to `redis-server` (e.g. `"--maxmemory"`, `"10mb"`).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// Pick a data port `p` with `p + 10000` free as well: the default cluster bus port of a
    /// Redis before 7.0, which cannot be set (`--cluster-port` came with 7.0).
    pub(crate) fn bus_above(mut self) -> Self {
        self.bus_above = true;
        self
    }

    /// Start the server.
    ///
    /// # Panics
    /// Panics with [`INSTALL_HINT`] when `redis-server` is missing, and with the server's own
    /// log when it does not answer within 10 s.
    pub fn start(self) -> RedisServer {
        RedisServer::start_with(self).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// A `redis-server` child process on a free port of 127.0.0.1; killed (SIGKILL) on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    options: ServerOptions,
    binary: PathBuf,
}

impl RedisServer {
    /// Start a server with no password and no persistence.
    ///
    /// # Panics
    /// As [`ServerOptions::start`].
    pub fn start() -> RedisServer {
        ServerOptions::default().start()
    }

    /// Options for a server that needs more than the defaults.
    pub fn options() -> ServerOptions {
        ServerOptions::default()
    }

    /// Start a server, returning an error instead of panicking (for the CLI's embedded mode).
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] with [`INSTALL_HINT`] when the binary is missing; other
    /// I/O errors when it cannot be spawned or does not answer within 10 s.
    pub fn start_with(options: ServerOptions) -> io::Result<RedisServer> {
        let binary = redis_server_binary()?;
        let mut last_err = None;
        for _ in 0..5 {
            let port = if options.bus_above {
                port_with_bus_above()
            } else {
                free_port()
            };
            let mut server = RedisServer {
                child: None,
                port,
                dir: tempfile::Builder::new()
                    .prefix("distlock-redis-")
                    .tempdir()?,
                options: options.clone(),
                binary: binary.clone(),
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    fn spawn(&mut self) -> io::Result<()> {
        let log = self.log_path();
        let mut cmd = Command::new(&self.binary);
        if let Some(config) = &self.options.sentinel_config {
            // The configuration file must be the first argument. Written once: a restarted
            // sentinel keeps the state it rewrote into it.
            let path = self.dir.path().join("sentinel.conf");
            if !path.is_file() {
                std::fs::write(&path, config)?;
            }
            cmd.arg(path).arg("--sentinel");
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .arg("--daemonize")
            .arg("no")
            .arg("--appendonly")
            .arg("no")
            .arg("--protected-mode")
            .arg("no");
        if server_major_version() >= 7 {
            // Our tests use DEBUG SLEEP / DEBUG RELOAD; from 7.0 DEBUG is off by default for
            // remote connections (before 7.0 it is always on, and the option unknown).
            cmd.arg("--enable-debug-command").arg("yes");
        }
        if self.options.tls {
            let (cert, key) = self.self_signed_cert()?;
            cmd.arg("--port")
                .arg("0")
                .arg("--tls-port")
                .arg(self.port.to_string())
                .arg("--tls-cert-file")
                .arg(&cert)
                .arg("--tls-key-file")
                .arg(&key)
                .arg("--tls-ca-cert-file")
                .arg(self.dir.path().join("ca.pem"))
                .arg("--tls-auth-clients")
                .arg("no");
        } else {
            cmd.arg("--port").arg(self.port.to_string());
        }
        if self.options.persistent {
            cmd.arg("--save")
                .arg("3600 1")
                .arg("--dbfilename")
                .arg("dump.rdb");
        } else {
            cmd.arg("--save").arg("");
        }
        if let Some(pw) = &self.options.password {
            cmd.arg("--requirepass").arg(pw);
        }
        cmd.args(&self.options.extra_args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Die with the thread that started the server, so a server held in a `static` (never
        // dropped) or left by a killed test process does not outlive it.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of
            // the parent; it runs in the child between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                        .map_err(io::Error::from)
                });
            }
        }
        let mut child = cmd.spawn()?;
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "redis-server on port {} exited with {status}; log:\n{log}",
                    self.port
                )));
            }
            // A TLS server listens only once it is ready; plain ones must answer, and be this
            // child: in the window between `free_port` and the bind, another test's server may
            // have taken the port (then this one fails to bind, and start_with retries).
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                let answering = if self.options.tls {
                    Some(child.id())
                } else {
                    self.answering_pid()
                };
                match answering {
                    Some(pid) if pid == child.id() => {
                        self.child = Some(child);
                        return Ok(());
                    }
                    Some(pid) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(io::Error::new(
                            io::ErrorKind::AddrInUse,
                            format!(
                                "port {} was taken by another server (pid {pid}) before this \
                                 one bound it",
                                self.port
                            ),
                        ));
                    }
                    None => {}
                }
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "redis-server on port {} did not answer PING within {START_TIMEOUT:?}; log:\n{log}",
                    self.port
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's certificate and key, for 127.0.0.1, signed by a test CA made for this
    /// server ([`RedisServer::tls_ca_cert`]); made once, kept across restarts.
    fn self_signed_cert(&self) -> io::Result<(PathBuf, PathBuf)> {
        let dir = self.dir.path();
        let (ca, ca_key) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
        let (cert, key, csr, ext) = (
            dir.join("cert.pem"),
            dir.join("key.pem"),
            dir.join("cert.csr"),
            dir.join("cert.ext"),
        );
        if cert.is_file() {
            return Ok((cert, key));
        }
        std::fs::write(
            &ext,
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )?;
        // One openssl step; its failure names the step.
        let run = |step: &str, cmd: &mut Command| -> io::Result<()> {
            let status = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("openssl is needed for TLS test servers (sudo apt-get install openssl): {e}"),
                    )
                })?;
            if !status.success() {
                return Err(io::Error::other(format!("openssl {step} failed: {status}")));
            }
            Ok(())
        };
        // The test CA.
        run(
            "req (CA)",
            Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args(["-subj", "/CN=distlock test CA", "-keyout"])
                .arg(&ca_key)
                .arg("-out")
                .arg(&ca),
        )?;
        // The server's key and request.
        run(
            "req (server)",
            Command::new("openssl")
                .args([
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-subj",
                    "/CN=127.0.0.1",
                ])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&csr),
        )?;
        // Signed by the CA, for 127.0.0.1.
        run(
            "x509",
            Command::new("openssl")
                .args(["x509", "-req", "-days", "2", "-CAcreateserial", "-in"])
                .arg(&csr)
                .arg("-CA")
                .arg(&ca)
                .arg("-CAkey")
                .arg(&ca_key)
                .arg("-out")
                .arg(&cert)
                .arg("-extfile")
                .arg(&ext),
        )?;
        Ok((cert, key))
    }

    /// The test CA that signed a TLS server's certificate (PEM), for clients that verify it
    /// (`ClientBuilder::tls_ca_cert`, `redis-cli --cacert`); `None` for a plain server.
    pub fn tls_ca_cert(&self) -> Option<PathBuf> {
        self.options.tls.then(|| self.dir.path().join("ca.pem"))
    }

    /// The process id of the server answering on this port (`INFO server`'s `process_id`),
    /// or `None` while none answers.
    fn answering_pid(&self) -> Option<u32> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
    }

    /// The server's TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://[:password@]127.0.0.1:<port>/` (the password percent-encoded), or
    /// `rediss://…/#insecure` for a TLS server.
    pub fn url(&self) -> String {
        // Percent-encoded: a password may hold `@ : / ? # %`.
        let auth = match &self.options.password {
            Some(pw) => {
                let encoded: String = pw
                    .bytes()
                    .map(|b| {
                        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                            (b as char).to_string()
                        } else {
                            format!("%{b:02X}")
                        }
                    })
                    .collect();
                format!(":{encoded}@")
            }
            None => String::new(),
        };
        if self.options.tls {
            format!("rediss://{auth}127.0.0.1:{}/#insecure", self.port)
        } else {
            format!("redis://{auth}127.0.0.1:{}/", self.port)
        }
    }

    /// The server's working directory (where `dump.rdb` lives).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log file (`redis.log` in its [directory](Self::dir)).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The server's log so far (empty when there is none yet), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// A new synchronous connection, for test set-up and assertions.
    ///
    /// # Panics
    /// Panics when the server does not accept the connection.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .unwrap_or_else(|e| panic!("cannot connect to test redis on {}: {e}", self.port))
    }

    /// Kill the server with SIGKILL (no shutdown save), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Pause the server with SIGSTOP (it keeps its connections but answers nothing).
    pub fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
    }

    /// Resume a server paused by [`RedisServer::pause`].
    pub fn resume(&self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(pid) = self.pid().and_then(|pid| i32::try_from(pid).ok()) {
            // Gone already: nothing to signal.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }

    /// Start the server again on the same port and directory (loading `dump.rdb` when the
    /// server is [persistent](ServerOptions::persistent)). Kills it first if it still runs.
    ///
    /// # Panics
    /// Panics when the server does not come back within 10 s.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.spawn() {
                Ok(()) => return,
                // The old socket may linger for a moment after SIGKILL.
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("restart failed: {e}"),
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server whose port another server took first (the window between `free_port` and
    /// the bind) is not taken for ready because the port answers: its spawn fails, so
    /// `start_with` retries on a fresh port, instead of a test talking to another test's
    /// server (a sentinel found to be a plain server was how this showed).
    #[test]
    fn a_port_taken_by_another_server_is_not_taken_for_ready() {
        let first = RedisServer::start();
        let mut second = RedisServer {
            child: None,
            port: first.port(),
            dir: tempfile::Builder::new()
                .prefix("distlock-redis-")
                .tempdir()
                .unwrap(),
            options: ServerOptions::default(),
            binary: redis_server_binary().unwrap(),
        };
        let e = second
            .spawn()
            .expect_err("the port answers, but not as this server");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(second.child.is_none());
    }

    #[test]
    fn starts_answers_and_dies_on_drop() {
        let server = RedisServer::start();
        let port = server.port();
        let mut con = server.connection();
        let pong: String = redis::cmd("PING").query(&mut con).unwrap();
        assert_eq!(pong, "PONG");
        drop(con);
        drop(server);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
    }

    #[test]
    fn restart_reloads_snapshot() {
        let mut server = RedisServer::options().persistent().start();
        let mut con = server.connection();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("before")
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("after")
            .query(&mut con)
            .unwrap();
        drop(con);
        server.restart();
        let mut con = server.connection();
        let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
        assert_eq!(v, "before");
    }
}
