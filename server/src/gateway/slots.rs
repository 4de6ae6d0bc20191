//! Concurrent gateway calls per API token, on this server: at most
//! `policy::limits::MAX_GATEWAY_CALLS_PER_TOKEN` open at once (one more is answered 429 with
//! `Retry-After: 1`). A call holds its [`Slot`] until its answer ends (a stream included) or
//! its client goes away. Counted in memory: each replica counts its own.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// The open calls, by token. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Slots {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open call; dropping it frees its place.
pub(super) struct Slot {
    slots: Slots,
    key: String,
}

impl Slots {
    /// A place for one more call of `key` (a token id), if it has fewer than `max` open.
    pub(super) fn take(&self, key: &str, max: usize) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key.to_owned()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self.clone(),
            key: key.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_max_places_and_a_closed_call_frees_its_own() {
        let slots = Slots::default();
        let a = slots.take("t1", 2).unwrap();
        let _b = slots.take("t1", 2).unwrap();
        assert!(slots.take("t1", 2).is_none());
        assert!(slots.take("t2", 2).is_some(), "another token counts apart");
        drop(a);
        assert!(slots.take("t1", 2).is_some());
    }
}
