//! A lock hold's release request ([`LockInner::release_request`]), and how the client's
//! registry of live holds asks for one ([`ReleasesHolds`]: a lock handle's shared state, no
//! allocation per hold).

use std::sync::Arc;
use std::time::Duration;

use super::raw::ReleaseCall;
use super::{LockInner, Owner};
use crate::keys;
use crate::registry::{ReleaseRequest, ReleasesHolds, What};
use crate::scripts::Invocation;

impl LockInner {
    /// The script call that releases one hold of `owner` (with a fresh request id for its
    /// unlock latch): a guard's release, a dropped guard's background release, and one at
    /// shutdown.
    pub(crate) fn release_request(&self, owner: &Owner, lease: Duration) -> ReleaseRequest {
        let n = &self.names;
        let client = &self.client;
        // A fresh request id (`Client::request_id`): its latch is named from it, in one
        // allocation, when the full call is built (the fast path has none).
        let seq = client.next_seq();
        let floor = client.backend().grant_floor(client.fencing_floor());
        let call = ReleaseCall {
            owner,
            lease_ms: lease.as_millis() as u64,
            latch: "",
            latch_ms: self.client.latch_ttl_ms(),
            floor: &floor,
            fast: self.contention.calm(),
        };
        let context = What::Named {
            op: "release",
            name: n.clone(),
        };
        let fast = self.raw.release_fast(n, &call);
        // The full script's call, the same each time it is built (the request id and floor
        // are fixed here): at once without a fast path, else only if a send needs it. It
        // holds the kind, the names and the client's id, not the handle: a release in the
        // background keeps no client alive.
        let (raw, names, id) = (self.raw.clone(), self.names.clone(), client.id_shared());
        let owner = owner.clone();
        let (lease_ms, latch_ms) = (call.lease_ms, call.latch_ms);
        let build = move || {
            let latch = keys::unlock_latch_of(&names.key, &id, seq);
            let call = ReleaseCall {
                owner: &owner,
                lease_ms,
                latch: &latch,
                latch_ms,
                floor: &floor,
                fast: false,
            };
            raw.release(&names, &call)
        };
        match fast {
            Some(fast) => ReleaseRequest::new(context, Invocation::later(build, fast)),
            None => ReleaseRequest::new(context, build()),
        }
    }
}

impl ReleasesHolds for LockInner {
    fn release_hold_request(&self, owner: &Arc<str>, lease: Duration) -> ReleaseRequest {
        self.release_request(&Owner::from_shared(owner.clone()), lease)
    }
}
