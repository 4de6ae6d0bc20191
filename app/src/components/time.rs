//! Time on screen: absolute deadlines in UTC and in the viewer's local time, and a countdown.
//!
//! The server owns every timer; these only display. The countdown reaching zero changes text,
//! never state: the page learns what the server did from the event stream. Local time and the
//! ticking clock exist only in the browser (the server does not know the viewer's time zone),
//! so the server-rendered page shows UTC and "local time appears when the page is live".

use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// `2026-11-30 08:00:05 UTC`. Written out by hand: chrono's `format` would pull its whole
/// strftime machinery into the WASM bundle for this one pattern.
pub fn format_utc(at: DateTime<Utc>) -> String {
    use chrono::{Datelike, Timelike};
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// Milliseconds since the epoch, from the browser's clock (the server's clock on the server).
pub fn now_millis() -> i64 {
    #[cfg(feature = "hydrate")]
    {
        web_sys::js_sys::Date::now() as i64
    }
    #[cfg(not(feature = "hydrate"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that ticks every second in the browser; `None` until the page is live.
pub fn use_clock() -> ReadSignal<Option<i64>> {
    let (now, set_now) = signal(None::<i64>);
    // Effects run only in the browser.
    Effect::new(move |_| {
        set_now.set(Some(now_millis()));
        #[cfg(feature = "hydrate")]
        {
            let handle = set_interval_with_handle(
                move || set_now.set(Some(now_millis())),
                std::time::Duration::from_secs(1),
            );
            if let Ok(handle) = handle {
                on_cleanup(move || handle.clear());
            }
        }
    });
    now
}

/// The date and time in the viewer's time zone, e.g. `30/11/2026, 09:00:05`.
fn local_text(at: DateTime<Utc>) -> String {
    #[cfg(feature = "hydrate")]
    {
        use web_sys::js_sys::{Date, Object, Reflect};
        let date = Date::new(&wasm_bindgen::JsValue::from_f64(at.timestamp_millis() as f64));
        let options = Object::new();
        let _ = Reflect::set(&options, &"dateStyle".into(), &"medium".into());
        let _ = Reflect::set(&options, &"timeStyle".into(), &"long".into());
        let text: String = date.to_locale_string("default", &options).into();
        text
    }
    #[cfg(not(feature = "hydrate"))]
    {
        format_utc(at)
    }
}

/// A length of time as a person reads it: `45 s`, `3 min 05 s`, `1 h 02 min`.
pub fn span_text(secs: i64) -> String {
    let (h, m, s) = (secs / 3_600, secs % 3_600 / 60, secs % 60);
    if h > 0 {
        format!("{h} h {m:02} min")
    } else if m > 0 {
        format!("{m} min {s:02} s")
    } else {
        format!("{s} s")
    }
}

/// How long until `deadline`, as a person reads it: `4 min 05 s`, `due now`.
pub fn countdown_text(deadline_ms: i64, now_ms: i64) -> String {
    let left = deadline_ms - now_ms;
    if left <= 0 {
        return "due now; waiting for the server to act".to_owned();
    }
    let secs = (left + 999) / 1000;
    let (d, h, m, s) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60, secs % 60);
    if d > 0 {
        format!("in {d} d {h} h {m:02} min")
    } else if h > 0 {
        format!("in {h} h {m:02} min {s:02} s")
    } else if m > 0 {
        format!("in {m} min {s:02} s")
    } else {
        format!("in {s} s")
    }
}

/// A deadline: local time (once live), UTC, and a display-only countdown.
#[component]
pub fn Deadline(#[prop(into)] at: Signal<Option<DateTime<Utc>>>) -> impl IntoView {
    let clock = use_clock();
    view! {
        {move || match at.get() {
            None => view! { <p class="text-sm text-slate-700">"No pending deadline."</p> }.into_any(),
            Some(deadline) => {
                let ms = deadline.timestamp_millis();
                view! {
                    <dl class="grid grid-cols-1 gap-x-4 gap-y-1 text-sm sm:grid-cols-[auto_1fr]" data-testid="deadline">
                        <dt class="font-medium text-slate-900">"Local time"</dt>
                        <dd class="text-slate-800" data-testid="deadline-local">
                            {move || {
                                if clock.get().is_some() {
                                    local_text(deadline)
                                } else {
                                    "appears when the page is live".to_owned()
                                }
                            }}
                        </dd>
                        <dt class="font-medium text-slate-900">"UTC"</dt>
                        <dd class="text-slate-800" data-testid="deadline-utc">
                            <time datetime=format_utc(deadline).replace(" UTC", "Z").replacen(' ', "T", 1)>{format_utc(deadline)}</time>
                        </dd>
                        <dt class="font-medium text-slate-900">"Countdown"</dt>
                        <dd class="font-semibold tabular-nums text-slate-900" data-testid="countdown">
                            {move || match clock.get() {
                                Some(now) => countdown_text(ms, now),
                                None => "starts when the page is live".to_owned(),
                            }}
                        </dd>
                    </dl>
                    <p class="mt-1 text-xs text-slate-600">
                        "The countdown only displays; the server acts at the deadline even if this page is closed."
                    </p>
                }
                    .into_any()
            }
        }}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn spans_read_in_the_largest_units() {
        assert_eq!(span_text(45), "45 s");
        assert_eq!(span_text(185), "3 min 05 s");
        assert_eq!(span_text(3_725), "1 h 02 min");
    }

    #[test]
    fn countdowns_read_like_a_person_writes_them() {
        assert_eq!(countdown_text(10_000, 0), "in 10 s");
        assert_eq!(countdown_text(10_001, 0), "in 11 s");
        assert_eq!(countdown_text(125_000, 0), "in 2 min 05 s");
        assert_eq!(countdown_text(3_725_000, 0), "in 1 h 02 min 05 s");
        assert_eq!(countdown_text(90_061_000, 0), "in 1 d 1 h 01 min");
        assert_eq!(countdown_text(0, 5), "due now; waiting for the server to act");
    }

    #[test]
    fn utc_is_spelled_out() {
        let at = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 5).unwrap();
        assert_eq!(format_utc(at), "2026-11-30 08:00:05 UTC");
    }
}
