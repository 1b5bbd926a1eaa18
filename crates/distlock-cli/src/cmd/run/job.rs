//! CMD as a job, the way a shell runs one (Linux): its own process group, the terminal's
//! foreground while it runs, and a guardian process that kills the whole group if distlock
//! dies. Elsewhere CMD is a plain child, signalled alone (see the module docs of `run`).
//!
//! - **Process group.** CMD is spawned with `setpgid(0, 0)` (its pgid is its pid), so that
//!   every process it starts and does not move elsewhere (`setsid`, `setpgid`: daemons, the
//!   jobs of an interactive shell) can be signalled at once: [`Job::signal`] sends to the
//!   group, as `kill -- -PGID` does.
//! - **Terminal.** When distlock's process group is the foreground group of its controlling
//!   terminal (a shell's foreground job), CMD's group is made the foreground group before
//!   `exec` (`tcsetpgrp`, with SIGTTOU ignored, as job-control shells do), so CMD reads the
//!   terminal and gets the keyboard's signals (Ctrl-C, Ctrl-\, Ctrl-Z) itself; distlock's group
//!   gets the foreground back when CMD ends. When CMD stops for job control (SIGTSTP,
//!   SIGTTIN, SIGTTOU), distlock stops itself with the same signal so that the shell sees
//!   the job stopped, and on `fg`/`bg` continues CMD's group (SIGCONT), handing it the
//!   terminal again if distlock got it back. Without a controlling terminal (cron, systemd)
//!   there is none of this.
//! - **Guardian.** Before CMD is spawned, distlock forks a guardian: it leaves distlock's
//!   session (`setsid`, so the terminal's signals to distlock do not reach it), closes every
//!   descriptor but the read end of a pipe whose write end only distlock holds
//!   (close-on-exec, so CMD does not inherit it), learns CMD's pgid through the pipe (CMD
//!   writes it before `exec`) and blocks reading. End of file — distlock died, however it
//!   died — makes it send SIGKILL to the whole group. On an ordinary end distlock writes
//!   [`DONE`] and the guardian exits without killing anything.
//! - **Leftovers.** When CMD (the direct child) exits, whatever is still running in its group
//!   is killed with SIGKILL before the lock is released: released, the lock no longer
//!   protects them. CMD is reaped only after that, so its pid, which is the group's number,
//!   cannot have been given to another process meanwhile.
//!
//! After `fork` in the guardian and in CMD's `pre_exec`, only async-signal-safe calls are
//! made (distlock is a multi-threaded process): raw system calls through `libc`, no
//! allocation, no lock, no panic.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};

use super::{SpawnError, State};

/// The byte distlock writes to the guardian on an ordinary end: exit without killing.
const DONE: u8 = b'D';

/// CMD, running: its process group, the guardian, the terminal. Dropped without
/// [`Job::finish`] (distlock gives up on an error), the guardian sees its pipe close and kills
/// the group, as if distlock had died.
pub struct Job {
    child: Child,
    /// CMD's pid, which is its process group's number.
    pgid: libc::pid_t,
    guardian: Option<Guardian>,
    terminal: Option<Terminal>,
}

impl Job {
    /// Spawn `command` as a job: its own process group, the terminal's foreground when
    /// distlock has it, a guardian, and the parent-death signal (`PR_SET_PDEATHSIG`, see
    /// `ChildSetup::apply`). Spawned from the calling thread, which must live as long as
    /// the run (the parent-death signal fires when it exits).
    pub fn spawn(mut command: Command) -> Result<Job, SpawnError> {
        let terminal = Terminal::open();
        let guardian = Guardian::start().map_err(SpawnError::Setup)?;
        let hand_over = terminal.as_ref().filter(|t| t.distlock_in_foreground());
        let setup = ChildSetup {
            wrapper: unsafe { libc::getpid() },
            guardian: guardian.tx.as_raw_fd(),
            terminal: hand_over.map(|t| t.fd.as_raw_fd()),
            ttou_ignored_before: terminal.as_ref().is_some_and(|t| t.ttou_ignored_before),
        };
        command.process_group(0);
        // SAFETY: the closure runs in the forked child before exec and makes only
        // async-signal-safe calls (see `ChildSetup::apply`); it allocates nothing.
        unsafe {
            command.pre_exec(move || setup.apply());
        }
        match command.spawn() {
            Ok(child) => {
                let pgid = child.id() as libc::pid_t;
                Ok(Job {
                    child,
                    pgid,
                    guardian: Some(guardian),
                    terminal,
                })
            }
            Err(e) => {
                // Nothing to kill: an exec that failed left no process of CMD's behind.
                guardian.disarm();
                Err(SpawnError::Command(e))
            }
        }
    }

    /// Send `sig` to CMD's whole process group (not to leftovers of a CMD that exited: the
    /// run ends with [`Job::finish`] once [`Job::state`] says so).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        // Gone already: nothing to signal.
        unsafe {
            libc::kill(-self.pgid, sig as libc::c_int);
        }
    }

    /// Whether CMD runs, stopped (reported once per stop) or exited. Call it on every
    /// SIGCHLD, and once before waiting for the first.
    pub fn state(&mut self) -> io::Result<State> {
        // An exit: looked at, not reaped (WNOWAIT), so that the pid (the group's number)
        // stays CMD's until its leftovers are killed.
        if waitid(self.pgid, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)?.is_some() {
            return Ok(State::Exited);
        }
        // A stop: consumed (WSTOPPED without WEXITED never reaps). ECHILD: CMD exited
        // since, as the next call finds.
        match waitid(self.pgid, libc::WSTOPPED | libc::WNOHANG) {
            Ok(Some(info)) => Ok(State::Stopped(unsafe { info.si_status() })),
            Ok(None) => Ok(State::Running),
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => Ok(State::Running),
            Err(e) => Err(e),
        }
    }

    /// CMD stopped by `sig`: with a terminal and a job-control stop (SIGTSTP, SIGTTIN,
    /// SIGTTOU), take the terminal back if CMD has it and stop distlock with the same
    /// signal, so that the shell sees its job stopped; once continued (`fg`, `bg`), hand
    /// the terminal to CMD again if distlock has it, and continue CMD's group. Other stops
    /// (SIGSTOP sent to CMD) are left to whoever sent them. Blocks while distlock is
    /// stopped (the lease is not renewed meanwhile, as when a shell stops distlock and CMD
    /// together).
    pub fn follow_stop(&mut self, sig: i32) {
        let Some(terminal) = &self.terminal else {
            return;
        };
        if ![libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU].contains(&sig) {
            return;
        }
        if terminal.foreground() == Some(self.pgid) {
            terminal.set_foreground(unsafe { libc::getpgrp() });
        }
        terminal.stop_self(sig);
        // Continued (or never stopped: the kernel discards job-control stops of an
        // orphaned process group, where no shell could continue it).
        if terminal.distlock_in_foreground() {
            terminal.set_foreground(self.pgid);
        }
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    /// CMD exited: kill what is left of its group (SIGKILL: released, the lock no longer
    /// protects it), disarm the guardian, give the terminal back to distlock's group if
    /// CMD's has it, and reap CMD.
    pub fn finish(mut self) -> io::Result<ExitStatus> {
        // CMD is not reaped yet: the group's number is still CMD's pid, never another's.
        self.signal(nix::sys::signal::Signal::SIGKILL);
        if let Some(guardian) = self.guardian.take() {
            guardian.disarm();
        }
        if let Some(terminal) = &self.terminal {
            if terminal.foreground() == Some(self.pgid) {
                terminal.set_foreground(unsafe { libc::getpgrp() });
            }
        }
        self.child.wait()
    }
}

/// `waitid(P_PID, pid, options)`: the child's report, or `None` when there is none.
fn waitid(pid: libc::pid_t, options: libc::c_int) -> io::Result<Option<libc::siginfo_t>> {
    // SAFETY: siginfo_t is plain data; waitid fills it, and leaves si_pid 0 with WNOHANG
    // when nothing is to be reported (hence zeroed first).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let id = libc::id_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        if unsafe { libc::waitid(libc::P_PID, id, &mut info, options) } == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok((unsafe { info.si_pid() } != 0).then_some(info))
}

/// What CMD's child does before `exec`, as plain data (copied into the forked child).
#[derive(Clone, Copy)]
struct ChildSetup {
    /// distlock's pid: a child whose parent is another has outlived it already.
    wrapper: libc::pid_t,
    /// The write end of the guardian's pipe (close-on-exec: CMD does not keep it).
    guardian: RawFd,
    /// The controlling terminal, when CMD is to be its foreground group.
    terminal: Option<RawFd>,
    /// Whether SIGTTOU was ignored before distlock ignored it (CMD gets that back).
    ttou_ignored_before: bool,
}

impl ChildSetup {
    /// In the forked child (its own process group already: `process_group(0)` comes first).
    /// Only async-signal-safe calls: getpid, write, prctl, getppid, raise, tcsetpgrp,
    /// signal.
    fn apply(&self) -> io::Result<()> {
        // SAFETY: raw system calls on plain values and a stack buffer.
        unsafe {
            // The guardian learns the group first: were distlock to die from here on, the
            // group is killed (this process's copy of the write end closes at exec or death).
            // (A guardian gone already makes this SIGPIPE, whose default action std restores
            // before this runs: CMD does not run unguarded.)
            let pgid = libc::getpid().to_ne_bytes();
            libc::write(self.guardian, pgid.as_ptr().cast(), pgid.len());
            // The direct child dies with distlock as well, at once.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Taken before the fork: another parent means distlock died between fork and
            // prctl (the child was re-parented) and the signal would never come.
            if libc::getppid() != self.wrapper {
                libc::raise(libc::SIGKILL);
            }
            if let Some(tty) = self.terminal {
                // SIGTTOU is ignored (distlock ignores it while it has a terminal), so a
                // process outside the foreground group may change it. Failing, CMD runs in
                // the background of the terminal, as `cmd &` would.
                libc::tcsetpgrp(tty, libc::getpgrp());
            }
            // CMD gets the SIGTTOU disposition distlock started with (ignored dispositions
            // survive exec).
            if !self.ttou_ignored_before {
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            }
        }
        Ok(())
    }
}

/// The controlling terminal (`/dev/tty`), while distlock has one. SIGTTOU is ignored from
/// then on, so that distlock can take the foreground back from CMD's group (and write its
/// warnings with `stty tostop`) while in the background.
struct Terminal {
    fd: OwnedFd,
    ttou_ignored_before: bool,
}

impl Terminal {
    fn open() -> Option<Terminal> {
        // SAFETY: open on a static C string; the descriptor is owned from here.
        let fd = unsafe {
            libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            // No controlling terminal (cron, systemd, setsid).
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: replaces SIGTTOU's disposition (no handler of distlock's: it was the
        // default or ignored).
        let before = unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
        Some(Terminal {
            fd,
            ttou_ignored_before: before == libc::SIG_IGN,
        })
    }

    /// The terminal's foreground process group, if it has one.
    fn foreground(&self) -> Option<libc::pid_t> {
        let pgrp = unsafe { libc::tcgetpgrp(self.fd.as_raw_fd()) };
        (pgrp > 0).then_some(pgrp)
    }

    /// Whether distlock's process group is the foreground group (a shell's foreground job).
    fn distlock_in_foreground(&self) -> bool {
        self.foreground() == Some(unsafe { libc::getpgrp() })
    }

    fn set_foreground(&self, pgrp: libc::pid_t) {
        // SIGTTOU is ignored: allowed from the background. Failing (the group is gone), the
        // terminal stays as it was.
        unsafe {
            libc::tcsetpgrp(self.fd.as_raw_fd(), pgrp);
        }
    }

    /// Stop distlock with `sig` (its default action: stop), as CMD was stopped; returns once
    /// distlock is continued.
    fn stop_self(&self, sig: i32) {
        // SAFETY: signal dispositions and a signal to this process. SIGTSTP and SIGTTIN
        // have their default action in distlock; SIGTTOU is ignored, so it gets it back for
        // the moment. raise() returns once the signal was delivered, i.e. once distlock was
        // continued.
        unsafe {
            if sig == libc::SIGTTOU {
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            }
            libc::raise(sig);
            if sig == libc::SIGTTOU {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            }
        }
    }
}

/// The guardian: a process forked from distlock that kills CMD's group if distlock dies.
struct Guardian {
    pid: libc::pid_t,
    /// The write end of its pipe, close-on-exec.
    tx: OwnedFd,
}

impl Guardian {
    fn start() -> io::Result<Guardian> {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 fills two descriptors, owned from here on.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Every signal blocked across the fork: one arriving before the guardian has reset
        // its handlers would run distlock's runtime's handler there (a byte into its signal
        // pipe, seen by distlock as a signal of its own).
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: signal masks of this thread, on stack values; fork, after which the child
        // runs only `guard` (async-signal-safe calls) and never returns.
        let pid = unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
            let pid = libc::fork();
            if pid == 0 {
                guard(rx.as_raw_fd());
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            pid
        };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        drop(rx);
        Ok(Guardian { pid, tx })
    }

    /// An ordinary end: tell the guardian to exit without killing, and reap it if it has.
    fn disarm(self) {
        // SAFETY: a write of one byte from a stack value; waitpid of our own child.
        unsafe {
            // A guardian that is gone already (someone killed it) makes this EPIPE, which
            // distlock ignores (SIGPIPE is ignored in Rust programs).
            libc::write(self.tx.as_raw_fd(), [DONE].as_ptr().cast(), 1);
            drop(self.tx);
            // Usually it exits at once; if not yet, it is reaped by init after distlock.
            libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG);
        }
    }
}

/// The guardian's life, in the forked child: only async-signal-safe calls, no allocation.
fn guard(rx: RawFd) -> ! {
    // SAFETY: raw system calls on plain values and stack buffers; ends with _exit.
    unsafe {
        // Out of distlock's session and process group: the terminal's signals, and a shell's
        // signals to distlock's job, do not reach it.
        libc::setsid();
        // Default actions, with whatever arrived since the fork discarded (setting SIG_IGN
        // discards a pending signal): distlock's runtime's handlers mean nothing here.
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_IGN);
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::chdir(c"/".as_ptr());
        close_all_but(rx);
        libc::prctl(libc::PR_SET_NAME, c"distlock-guard".as_ptr());
        let mut pgid = [0u8; 4];
        let mut have = 0usize;
        let mut buf = [0u8; 16];
        loop {
            let n = libc::read(rx, buf.as_mut_ptr().cast(), buf.len());
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                // End of file: distlock is gone (or a read error: the same, to be safe).
                break;
            }
            for &byte in buf.iter().take(n as usize) {
                if have < pgid.len() {
                    pgid[have] = byte;
                    have += 1;
                } else if byte == DONE {
                    libc::_exit(0);
                }
            }
        }
        if have == pgid.len() {
            let pgid = libc::pid_t::from_ne_bytes(pgid);
            if pgid > 0 {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        libc::_exit(0)
    }
}

/// Close every descriptor but `keep` (close_range, Linux 5.9; else one by one up to the
/// descriptor limit).
unsafe fn close_all_but(keep: RawFd) {
    let keep = keep as libc::c_uint;
    let closed = (keep == 0 || libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32) == 0)
        && libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0u32) == 0;
    if closed {
        return;
    }
    let mut limit: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(1 << 20) as libc::c_uint
    } else {
        1024
    };
    for fd in 0..max {
        if fd != keep {
            libc::close(fd as libc::c_int);
        }
    }
}
