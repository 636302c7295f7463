//! Lock helpers shared by the runtime.

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, taking the guard of a poisoned mutex as is: every lock of the runtime
/// guards state that stays consistent between statements (a panic in a user callback
/// must not turn every later call on the device into a panic).
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
