//! Live updates: the server's route event stream (Server-Sent Events at `/api/v1/events`,
//! one `RouteEventPayload` JSON per event), opened with the browser's `EventSource` while a page
//! that shows routes is on screen. It exists only in the browser; the server-rendered page is
//! already current when it is sent.
//!
//! Pages do not patch their view from the event: they re-read the route (or list) through the
//! same server function, so what is shown is always the authoritative state, history included.
//! The event only says "something changed", and which route when the payload names it.

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

/// Calls `on_event` with the route id (if named) of every event while the caller is mounted.
pub fn use_route_events(on_event: impl Fn(Option<String>) + 'static) -> ReadSignal<LiveStatus> {
    let (status, set_status) = signal(LiveStatus::Off);
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::{closure::Closure, JsCast};
        use web_sys::{EventSource, MessageEvent};

        let on_event = std::rc::Rc::new(on_event);
        let source = StoredValue::new_local(None::<EventSource>);
        Effect::new(move |_| {
            set_status.set(LiveStatus::Connecting);
            let Ok(es) = EventSource::new("/api/v1/events") else {
                set_status.set(LiveStatus::Reconnecting);
                return;
            };
            let handler = on_event.clone();
            let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
                let data = ev.data().as_string().unwrap_or_default();
                handler(event_route_id(&data));
            });
            // Unnamed events arrive as `message`; a stream may also name them `route`.
            let _ = es.add_event_listener_with_callback("message", on_message.as_ref().unchecked_ref());
            let _ = es.add_event_listener_with_callback("route", on_message.as_ref().unchecked_ref());
            on_message.forget();
            let on_open = Closure::<dyn FnMut()>::new(move || set_status.set(LiveStatus::Connected));
            es.set_onopen(Some(on_open.as_ref().unchecked_ref()));
            on_open.forget();
            let on_error = Closure::<dyn FnMut()>::new(move || set_status.set(LiveStatus::Reconnecting));
            es.set_onerror(Some(on_error.as_ref().unchecked_ref()));
            on_error.forget();
            source.set_value(Some(es));
        });
        on_cleanup(move || {
            if let Some(es) = source.try_get_value().flatten() {
                es.close();
            }
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
