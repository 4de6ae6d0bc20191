//! Live updates: the server's route event stream (Server-Sent Events at `/api/v1/events`,
//! one `RouteEventPayload` JSON per event), opened with the browser's `EventSource` while a page
//! that shows routes is on screen. It exists only in the browser; the server-rendered page is
//! already current when it is sent.
//!
//! Pages do not patch their view from the event: they re-read the route (or list) through the
//! same server function, so what is shown is always the authoritative state, history included.
//! The event only says "something changed", and which route when the payload names it.
//!
//! Why gaps reload everything: events are only "something changed" notices, so a notice that
//! never arrived leaves the page stale with nothing to tell it so. Events can be missed in two
//! ways: the server drops them for a client that fell behind and says so with a `lagged`
//! event, and nothing is delivered while the stream is not open (before it first opens, after
//! the page was rendered, and while the browser reconnects after a drop). So every `lagged`
//! notice and every open of the stream (the first included) is a gap: the pages read
//! [`Live::gaps`] in their resources' sources, so a gap reloads all they show, and the status
//! line says "catching up" instead of "live" until a reload after the latest gap has
//! succeeded ([`Live::reload`]).
//!
//! Why the stream is owned by a value with a `Drop`: every page mount opens one stream and
//! hands the browser Rust callbacks. Closing the stream alone would leave those callbacks (and
//! what they capture) alive for the life of the tab, one set per visit; so the stream, its
//! listeners and its callbacks are one value that the page's cleanup drops, which detaches the
//! listeners, closes the connection and frees the callbacks together.

use leptos::prelude::*;
use std::future::Future;

/// The stream's state, shown to the person so a dead connection or a page being brought up to
/// date is not mistaken for a quiet route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveStatus {
    /// Server-rendered, not yet live.
    Off,
    Connecting,
    /// Connected, but events may have been missed and the reload that covers them has not
    /// succeeded yet.
    CatchingUp,
    Connected,
    /// The browser is reconnecting (the server restarted or the network dropped).
    Reconnecting,
}

impl LiveStatus {
    pub const fn text(self) -> &'static str {
        match self {
            LiveStatus::Off => "Live updates start when the page is live.",
            LiveStatus::Connecting => "Connecting to live updates…",
            LiveStatus::CatchingUp => {
                "Catching up: reloading what changed while live updates were not arriving. What you see may be \
                 out of date."
            }
            LiveStatus::Connected => "Live: changes appear here as they happen.",
            LiveStatus::Reconnecting => "Live updates lost; reconnecting. What you see may be out of date.",
        }
    }
}

/// The route id an event is about, when its JSON names one (`route_id`, or `snapshot.route_id`).
pub fn event_route_id(data: &str) -> Option<String> {
    let v: serde_json::Value = crate::codec::value(data).ok()?;
    v.get("route_id")
        .or_else(|| v.get("snapshot").and_then(|s| s.get("route_id")))
        .and_then(|id| id.as_str())
        .map(str::to_owned)
}

/// What the stream tells the page, for the status line and for reloading after a gap.
#[derive(Debug, Clone, Copy)]
pub struct Live {
    /// The connection's own state (never `CatchingUp`; see [`Live::status`]).
    stream: ReadSignal<LiveStatus>,
    /// How many gaps so far: opens of the stream and `lagged` notices.
    gaps: ReadSignal<u64>,
    /// The latest gap after which a reload succeeded.
    caught_up: RwSignal<u64>,
}

impl Live {
    /// What the status line says: the connection's state, or `CatchingUp` while connected with
    /// a gap not yet covered by a successful reload.
    pub fn status(self) -> LiveStatus {
        let stream = self.stream.get();
        if stream == LiveStatus::Connected && self.caught_up.get() < self.gaps.get() {
            LiveStatus::CatchingUp
        } else {
            stream
        }
    }

    /// The number of gaps so far (tracked): read it in the source of every resource the page
    /// shows, so each gap reloads it, and hand it to [`Live::reload`].
    pub fn gaps(self) -> u64 {
        self.gaps.get()
    }

    /// Runs `load`, the reload a resource does for `gap` (the value [`Live::gaps`] had in its
    /// source); once it succeeds, that gap is caught up. A failed reload leaves the status at
    /// "catching up" (the page shows the error), and a later success clears it.
    pub async fn reload<T, E>(self, gap: u64, load: impl Future<Output = Result<T, E>>) -> Result<T, E> {
        let result = load.await;
        if result.is_ok() {
            // `try_`: the page may have gone while the reload ran.
            self.caught_up.try_update(|c| *c = (*c).max(gap));
        }
        result
    }
}

#[cfg(feature = "hydrate")]
mod stream {
    use super::{event_route_id, LiveStatus};
    use leptos::prelude::{Set, Update, WriteSignal};
    use wasm_bindgen::{closure::Closure, JsCast};
    use web_sys::{EventSource, MessageEvent};

    /// The event names a route change may arrive under: unnamed events are `message`; the
    /// server names them `route`.
    const EVENT_NAMES: [&str; 2] = ["message", "route"];
    /// The server's notice that it dropped events for this client (data: how many).
    const LAGGED: &str = "lagged";
    /// A running attempt's live update (what the agent said or did).
    const UPDATE: &str = "update";

    /// One open stream and the callbacks the browser holds for it. Dropping it detaches the
    /// callbacks, closes the connection and frees them.
    pub(super) struct LiveStream {
        source: EventSource,
        on_message: Closure<dyn FnMut(MessageEvent)>,
        on_update: Option<Closure<dyn FnMut(MessageEvent)>>,
        on_lagged: Closure<dyn FnMut()>,
        _on_open: Closure<dyn FnMut()>,
        _on_error: Closure<dyn FnMut()>,
    }

    impl LiveStream {
        /// Opens the stream. `gaps` counts every open (the first included: nothing was heard
        /// between the page's data and the open) and every `lagged` notice.
        pub(super) fn open(
            url: &str,
            on_event: std::rc::Rc<dyn Fn(Option<String>)>,
            on_update: Option<std::rc::Rc<dyn Fn(Option<String>)>>,
            status: WriteSignal<LiveStatus>,
            gaps: WriteSignal<u64>,
        ) -> Option<LiveStream> {
            let source = EventSource::new(url).ok()?;
            let listener = |callback: std::rc::Rc<dyn Fn(Option<String>)>| {
                Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
                    let data = ev.data().as_string().unwrap_or_default();
                    callback(event_route_id(&data));
                })
            };
            let on_message = listener(on_event);
            for name in EVENT_NAMES {
                let _ = source.add_event_listener_with_callback(name, on_message.as_ref().unchecked_ref());
            }
            let on_update = on_update.map(listener);
            if let Some(on_update) = &on_update {
                let _ = source.add_event_listener_with_callback(UPDATE, on_update.as_ref().unchecked_ref());
            }
            let on_lagged = Closure::<dyn FnMut()>::new(move || gaps.update(|g| *g += 1));
            let _ = source.add_event_listener_with_callback(LAGGED, on_lagged.as_ref().unchecked_ref());
            let on_open = Closure::<dyn FnMut()>::new(move || {
                status.set(LiveStatus::Connected);
                gaps.update(|g| *g += 1);
            });
            source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
            let on_error = Closure::<dyn FnMut()>::new(move || status.set(LiveStatus::Reconnecting));
            source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
            Some(LiveStream {
                source,
                on_message,
                on_update,
                on_lagged,
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
            if let Some(on_update) = &self.on_update {
                let _ = self
                    .source
                    .remove_event_listener_with_callback(UPDATE, on_update.as_ref().unchecked_ref());
            }
            let _ = self
                .source
                .remove_event_listener_with_callback(LAGGED, self.on_lagged.as_ref().unchecked_ref());
            self.source.set_onopen(None);
            self.source.set_onerror(None);
            self.source.close();
            // The closures are dropped with `self`, after nothing refers to them any more.
        }
    }
}

/// Every event and gap any page's stream has seen, counted app-wide (provided by the app with
/// [`provide_event_ticks`]): what the header reads to stay current without a stream of its own
/// (a page keeps one stream; pages without live updates keep none), and the changes a page
/// made itself to what the header shows ([`EventTicks::bump`]).
#[derive(Debug, Clone, Copy)]
pub struct EventTicks(RwSignal<u64>);

impl EventTicks {
    /// The count (tracked).
    pub fn get(self) -> u64 {
        self.0.get()
    }

    /// Counts one more: what the stream's events and gaps do, and what a page does after it
    /// changed something the header shows itself (marking notifications read).
    pub fn bump(self) {
        // `try_`: the app may be going away.
        self.0.try_update(|n| *n += 1);
    }
}

/// Provides [`EventTicks`] to the whole app.
pub fn provide_event_ticks() {
    provide_context(EventTicks(RwSignal::new(0)));
}

/// The app's [`EventTicks`], if provided.
pub fn use_event_ticks() -> Option<EventTicks> {
    use_context::<EventTicks>()
}

/// Calls `on_event` with the route id (if named) of every event while the caller is mounted,
/// and counts the gaps the caller must reload after (see the module docs). The stream is
/// closed, and its callbacks freed, when the caller's owner is cleaned up. Every event and gap
/// also ticks the app's [`EventTicks`].
pub fn use_route_events(on_event: impl Fn(Option<String>) + 'static) -> Live {
    use_stream(on_event, None::<fn(Option<String>)>)
}

/// [`use_route_events`], and `on_update` with the route id of every live update of a running
/// attempt (what its agent said or did; `update` events). Updates come often while an agent
/// streams, so a page reloads only what they change.
pub fn use_route_events_and_updates(
    on_event: impl Fn(Option<String>) + 'static,
    on_update: impl Fn(Option<String>) + 'static,
) -> Live {
    use_stream(on_event, Some(on_update))
}

fn use_stream(
    on_event: impl Fn(Option<String>) + 'static,
    on_update: Option<impl Fn(Option<String>) + 'static>,
) -> Live {
    let (status, set_status) = signal(LiveStatus::Off);
    let (gaps, set_gaps) = signal(0u64);
    let ticks = use_event_ticks();
    let on_event = move |id: Option<String>| {
        if let Some(t) = ticks {
            t.bump();
        }
        on_event(id);
    };
    if let Some(t) = ticks {
        Effect::new(move |_| {
            if gaps.get() > 0 {
                t.bump();
            }
        });
    }
    #[cfg(feature = "hydrate")]
    {
        let on_event: std::rc::Rc<dyn Fn(Option<String>)> = std::rc::Rc::new(on_event);
        let on_update = on_update.map(|f| std::rc::Rc::new(f) as std::rc::Rc<dyn Fn(Option<String>)>);
        let live = StoredValue::new_local(None::<stream::LiveStream>);
        Effect::new(move |_| {
            set_status.set(LiveStatus::Connecting);
            match stream::LiveStream::open(
                "/api/v1/events",
                on_event.clone(),
                on_update.clone(),
                set_status,
                set_gaps,
            ) {
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
        let _ = (on_event, on_update, set_status, set_gaps);
    }
    Live {
        stream: status,
        gaps,
        caught_up: RwSignal::new(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{
        pin::pin,
        task::{Context, Poll, Waker},
    };

    /// Runs a future that is ready at once.
    fn now<F: Future>(f: F) -> F::Output {
        match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the reload in these tests never waits"),
        }
    }

    #[test]
    fn after_a_gap_the_status_says_catching_up_until_a_reload_for_it_succeeds() {
        let owner = Owner::new();
        owner.with(|| {
            let (stream, set_stream) = signal(LiveStatus::Connecting);
            let (gaps, set_gaps) = signal(0u64);
            let live = Live {
                stream,
                gaps,
                caught_up: RwSignal::new(0),
            };
            // The stream opens: a gap (nothing was heard before).
            set_stream.set(LiveStatus::Connected);
            set_gaps.set(1);
            assert_eq!(live.status(), LiveStatus::CatchingUp);
            assert_eq!(now(live.reload(1, async { Ok::<_, ()>(()) })), Ok(()));
            assert_eq!(live.status(), LiveStatus::Connected);

            // A lagged notice: a failed reload leaves the page catching up, a later one clears it.
            set_gaps.set(2);
            assert_eq!(live.status(), LiveStatus::CatchingUp);
            assert_eq!(
                now(live.reload(2, async { Err::<(), _>("unreachable") })),
                Err("unreachable")
            );
            assert_eq!(live.status(), LiveStatus::CatchingUp);
            // A reload for an older gap that lands late does not clear a newer one.
            let _ = now(live.reload(1, async { Ok::<_, ()>(()) }));
            assert_eq!(live.status(), LiveStatus::CatchingUp);
            let _ = now(live.reload(2, async { Ok::<_, ()>(()) }));
            assert_eq!(live.status(), LiveStatus::Connected);

            // While the connection is down, that is what the status says.
            set_stream.set(LiveStatus::Reconnecting);
            set_gaps.set(3);
            assert_eq!(live.status(), LiveStatus::Reconnecting);
        });
    }

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
