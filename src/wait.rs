//! The one host-wait path: every call that blocks the host until GPU work completes
//! (stream and event synchronize, their deadline forms, the kernarg ring waiting for a
//! segment, the stream-ordered allocator through them, and the callback dispatcher
//! sleeping on a pending callback's start point) goes through
//! [`DeviceInner::host_synchronize`] or [`DeviceInner::wait_point`] /
//! [`DeviceInner::wait_point_until`]. A wait spins on the
//! timeline briefly, then sleeps in WAIT_EVENTS on the timeline's interrupt (see
//! [`crate::signal::Signal::wait`]), and checks for device faults between sleeps so that
//! work a fault stopped fails instead of hanging.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::device::DeviceInner;
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Point, StreamInner};

/// How long one sleep lasts before faults are checked again.
const FAULT_CHECK_PERIOD: Duration = Duration::from_millis(50);

impl DeviceInner {
    /// The host-synchronize sequence: hand the callback dispatcher role on (a callback
    /// may be what the host is about to wait for), wait for every point in turn, then let
    /// the stream-ordered allocator release what the completed work freed. NotReady at
    /// `deadline`; LaunchFailure (and `owner`'s sticky error) on a fault.
    pub(crate) fn host_synchronize(
        self: &Arc<Self>,
        points: impl IntoIterator<Item = Point>,
        owner: Option<&Arc<StreamInner>>,
        spin: Duration,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let mut blocked = false;
        for p in points {
            if p.done() {
                continue;
            }
            if !blocked {
                crate::callback::before_blocking(self);
                blocked = true;
            }
            self.wait_point_until(&p, owner, spin, deadline)?;
        }
        crate::mempool::on_synchronize(self);
        Ok(())
    }

    /// Host wait for a point, failing instead of hanging when the device reported a fault
    /// that stopped the work (`owner` then gets the sticky error).
    pub(crate) fn wait_point(
        &self,
        p: &Point,
        owner: Option<&Arc<StreamInner>>,
        spin: Duration,
    ) -> Result<()> {
        self.wait_point_until(p, owner, spin, None)
    }

    /// [`DeviceInner::wait_point`] that gives up with NotReady at `deadline`.
    pub(crate) fn wait_point_until(
        &self,
        p: &Point,
        owner: Option<&Arc<StreamInner>>,
        spin: Duration,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let th = p.threshold();
        loop {
            let step = Instant::now() + FAULT_CHECK_PERIOD;
            let r = p.timeline.wait(
                |v| v <= th,
                spin,
                Some(deadline.map_or(step, |d| d.min(step))),
            );
            match r {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::NotReady => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        if let Some(f) = self.check_faults(p.gpu_index) {
                            if let Some(o) = owner {
                                o.fail(f.clone());
                            }
                            return Err(Error::new(ErrorKind::LaunchFailure, "synchronize", f));
                        }
                        return Err(Error::new(
                            ErrorKind::NotReady,
                            "synchronize_timeout",
                            "the deadline passed before the work completed",
                        ));
                    }
                    if let Some(f) = self.check_faults(p.gpu_index) {
                        if let Some(o) = owner {
                            o.fail(f.clone());
                        }
                        return Err(Error::new(ErrorKind::LaunchFailure, "synchronize", f));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}
