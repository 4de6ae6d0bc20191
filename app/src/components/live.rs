//! Live updates: the server's route event stream (Server-Sent Events at `/api/v1/events`,
//! one `RouteEventPayload` JSON per event), opened with the browser's `EventSource` while a page
//! that shows routes is on screen. It exists only in the browser; the server-rendered page is
//! already current when it is sent.
//!
//! Pages do not patch their view from the event: they re-read the route (or list) through the
//! same server function, so what is shown is always the authoritative state, history included.
//! The event only says "something changed", and which route when the payload names it.
//!
//! Why the stream is owned by a value with a `Drop`: every page mount opens one stream and
//! hands the browser three Rust callbacks. Closing the stream alone would leave those callbacks
//! (and what they capture) alive for the life of the tab, one set per visit; so the stream, its
//! listeners and its callbacks are one value that the page's cleanup drops, which detaches the
//! listeners, closes the connection and frees the callbacks together.

use leptos::prelude::*;

/// The stream's state, shown to the person so a dead connection is not mistaken for a quiet
/// route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveStatus {
    /// Server-rendered, not yet live.
    Off,
    Connecting,
    Connected,
    /// The browser is reconnecting (the server restarted or the network dropped).
    Reconnecting,
}

impl LiveStatus {
    pub const fn text(self) -> &'static str {
        match self {
            LiveStatus::Off => "Live updates start when the page is live.",
            LiveStatus::Connecting => "Connecting to live updates…",
            LiveStatus::Connected => "Live: changes appear here as they happen.",
            LiveStatus::Reconnecting => "Live updates lost; reconnecting. What you see may be out of date.",
        }
    }
}

/// The route id an event is about, when its JSON names one (`route_id`, or `snapshot.route_id`).
pub fn event_route_id(data: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    v.get("route_id")
        .or_else(|| v.get("snapshot").and_then(|s| s.get("route_id")))
        .and_then(|id| id.as_str())
        .map(str::to_owned)
}

#[cfg(feature = "hydrate")]
mod stream {
    use super::{event_route_id, LiveStatus};
    use leptos::prelude::{Set, WriteSignal};
    use wasm_bindgen::{closure::Closure, JsCast};
    use web_sys::{EventSource, MessageEvent};

    /// The event names a route change may arrive under: unnamed events are `message`; the
    /// server names them `route`.
    const EVENT_NAMES: [&str; 2] = ["message", "route"];

    /// One open stream and the callbacks the browser holds for it. Dropping it detaches the
    /// callbacks, closes the connection and frees them.
    pub(super) struct LiveStream {
        source: EventSource,
        on_message: Closure<dyn FnMut(MessageEvent)>,
        _on_open: Closure<dyn FnMut()>,
        _on_error: Closure<dyn FnMut()>,
    }

    impl LiveStream {
        pub(super) fn open(
            url: &str,
            on_event: std::rc::Rc<dyn Fn(Option<String>)>,
            status: WriteSignal<LiveStatus>,
        ) -> Option<LiveStream> {
            let source = EventSource::new(url).ok()?;
            let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
                let data = ev.data().as_string().unwrap_or_default();
                on_event(event_route_id(&data));
            });
            for name in EVENT_NAMES {
                let _ = source.add_event_listener_with_callback(name, on_message.as_ref().unchecked_ref());
            }
            let on_open = Closure::<dyn FnMut()>::new(move || status.set(LiveStatus::Connected));
            source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
            let on_error = Closure::<dyn FnMut()>::new(move || status.set(LiveStatus::Reconnecting));
            source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
            Some(LiveStream {
                source,
                on_message,
                _on_open: on_open,
                _on_error: on_error,
            })
        }
    }

    impl Drop for LiveStream {
        fn drop(&mut self) {
            for name in EVENT_NAMES {
                let _ = self
                    .source
                    .remove_event_listener_with_callback(name, self.on_message.as_ref().unchecked_ref());
            }
            self.source.set_onopen(None);
            self.source.set_onerror(None);
            self.source.close();
            // The closures are dropped with `self`, after nothing refers to them any more.
        }
    }
}

/// Calls `on_event` with the route id (if named) of every event while the caller is mounted.
/// The stream is closed, and its callbacks freed, when the caller's owner is cleaned up.
pub fn use_route_events(on_event: impl Fn(Option<String>) + 'static) -> ReadSignal<LiveStatus> {
    let (status, set_status) = signal(LiveStatus::Off);
    #[cfg(feature = "hydrate")]
    {
        let on_event: std::rc::Rc<dyn Fn(Option<String>)> = std::rc::Rc::new(on_event);
        let live = StoredValue::new_local(None::<stream::LiveStream>);
        Effect::new(move |_| {
            set_status.set(LiveStatus::Connecting);
            match stream::LiveStream::open("/api/v1/events", on_event.clone(), set_status) {
                // Replacing an earlier stream (if the effect ever re-ran) drops and closes it.
                Some(s) => live.set_value(Some(s)),
                None => set_status.set(LiveStatus::Reconnecting),
            }
        });
        on_cleanup(move || {
            // Dropping the stream closes it and frees its callbacks.
            drop(live.try_update_value(Option::take));
        });
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (on_event, set_status);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_id_is_read_from_the_payload_when_present() {
        assert_eq!(
            event_route_id(r#"{"route_id":"r1","to":"retry_wait"}"#),
            Some("r1".into())
        );
        assert_eq!(
            event_route_id(r#"{"snapshot":{"route_id":"r2"}}"#),
            Some("r2".into())
        );
        assert_eq!(event_route_id(r#"{"to":"retry_wait"}"#), None);
        assert_eq!(event_route_id("not json"), None);
    }
}
