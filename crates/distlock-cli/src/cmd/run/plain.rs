//! CMD as a plain child (outside Linux): signals go to it alone, and nothing stops it or
//! its children if distlock dies (the lock then expires after its lease while CMD may still
//! run). Linux runs CMD as a job instead (`job.rs`).

use std::io;
use std::process::{Child, Command, ExitStatus};

use super::{SpawnError, State};

pub struct Job {
    child: Child,
    /// Its status, once `try_wait` reaped it.
    status: Option<ExitStatus>,
}

impl Job {
    pub fn spawn(mut command: Command) -> Result<Job, SpawnError> {
        let child = command.spawn().map_err(SpawnError::Command)?;
        Ok(Job {
            child,
            status: None,
        })
    }

    /// Send `sig` to CMD (not to its children).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // Gone already: nothing to signal.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }

    /// Whether CMD runs or exited (stops are not reported here).
    pub fn state(&mut self) -> io::Result<State> {
        if self.status.is_none() {
            self.status = self.child.try_wait()?;
        }
        Ok(if self.status.is_some() {
            State::Exited
        } else {
            State::Running
        })
    }

    /// No job control outside Linux.
    pub fn follow_stop(&mut self, _sig: i32) {}

    pub fn finish(mut self) -> io::Result<ExitStatus> {
        match self.status {
            Some(status) => Ok(status),
            None => self.child.wait(),
        }
    }
}
