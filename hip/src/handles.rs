//! Handle registries: a C handle is an opaque token looked up in a table, never a pointer
//! to freed memory, so a destroyed or foreign handle is `hipErrorInvalidHandle`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One counter for every handle kind, so a stream token is never a valid event token.
/// Tokens start high and step by 16: 0, 1 and 2 are HIP's special streams.
static NEXT: AtomicUsize = AtomicUsize::new(0x1_0000);

/// A table of live handles of one kind.
pub struct Registry<T> {
    map: Mutex<Option<HashMap<usize, Arc<T>>>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Registry<T> {
    /// An empty registry (const, for statics).
    pub const fn new() -> Self {
        Registry {
            map: Mutex::new(None),
        }
    }
    fn lock(&self) -> MutexGuard<'_, Option<HashMap<usize, Arc<T>>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Register `v`; its token.
    pub fn insert(&self, v: T) -> usize {
        let token = NEXT.fetch_add(16, Ordering::Relaxed);
        self.lock()
            .get_or_insert_with(HashMap::new)
            .insert(token, Arc::new(v));
        token
    }
    /// The live object of `token`.
    pub fn get(&self, token: usize) -> Option<Arc<T>> {
        self.lock().as_ref()?.get(&token).cloned()
    }
    /// Unregister `token`; the object (dropped when the last user lets go).
    pub fn remove(&self, token: usize) -> Option<Arc<T>> {
        self.lock().as_mut()?.remove(&token)
    }
    /// Unregister every object `keep` rejects.
    pub fn retain(&self, mut keep: impl FnMut(&T) -> bool) {
        if let Some(m) = self.lock().as_mut() {
            m.retain(|_, v| keep(v));
        }
    }
    /// Every live object.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.lock()
            .as_ref()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_and_foreign_tokens_are_unknown() {
        let a: Registry<u32> = Registry::new();
        let b: Registry<u32> = Registry::new();
        let ta = a.insert(1);
        let tb = b.insert(2);
        assert_ne!(ta, tb);
        assert!(ta > 2 && tb > 2, "0, 1, 2 are HIP's special streams");
        assert_eq!(a.get(ta).as_deref(), Some(&1));
        assert!(a.get(tb).is_none(), "a token of another kind is foreign");
        assert!(a.get(0xdead).is_none());
        assert_eq!(a.remove(ta).as_deref(), Some(&1));
        assert!(a.get(ta).is_none() && a.remove(ta).is_none());
        assert_eq!(b.all().len(), 1);
    }
}
