//! A route's life as a picture: one lane per candidate (in the order they were first used),
//! each attempt a bar coloured by how it ended, each retry wait and reset wait a dashed gap up
//! to its deadline, and markers where the route switched candidate, a person acted, or it
//! stopped for a person. The same facts as a list for screen readers, which the picture points
//! at (`aria-describedby`).
//!
//! Why the time axis is not linear: a route's life mixes attempts of a second with waits of
//! hours or days. Every instant the picture shows is a break on the axis, and the distance
//! between two breaks grows with the logarithm of the time between them, so order and "this
//! wait was long" survive while a seven-day wait does not squeeze the attempts to nothing. The
//! exact times are in the list and in each shape's tooltip.
//!
//! The picture is as wide as it needs; on a phone it scrolls sideways inside its own box (a
//! focusable region), never the page. It is drawn from the route's detail, which the route
//! page reloads on every event, so it is live. It uses no clock: a running attempt's bar ends
//! at the latest instant the route knows of, with an open end.

use crate::components::{route_view::state_label, time::format_utc};
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use policy::{
    api::{DispatchOutcome, DispatchStatus, RouteDetail},
    route::EventKind,
    wire::StateName,
};

const LEFT: f64 = 12.0;
const RIGHT: f64 = 24.0;
const LANE_HEIGHT: f64 = 56.0;
const LABEL_OFFSET: f64 = 16.0;
const BAR_OFFSET: f64 = 24.0;
const BAR_HEIGHT: f64 = 18.0;
const AXIS_HEIGHT: f64 = 28.0;
/// The smallest drawn width of an attempt, so an instant failure is still visible.
const MIN_BAR: f64 = 6.0;

/// How an attempt ended, and its colour (each at least 3:1 against white).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarKind {
    Running,
    Succeeded,
    Failed,
    Aborted,
    Superseded,
    Ambiguous,
}

impl BarKind {
    const fn colour(self) -> &'static str {
        match self {
            BarKind::Running => "#0369a1",
            BarKind::Succeeded => "#047857",
            BarKind::Failed => "#b91c1c",
            BarKind::Aborted => "#475569",
            BarKind::Superseded => "#64748b",
            BarKind::Ambiguous => "#b45309",
        }
    }

    const fn word(self) -> &'static str {
        match self {
            BarKind::Running => "running",
            BarKind::Succeeded => "succeeded",
            BarKind::Failed => "failed",
            BarKind::Aborted => "aborted",
            BarKind::Superseded => "never started",
            BarKind::Ambiguous => "unknown after a restart",
        }
    }
}

/// A wait between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapKind {
    Retry,
    Reset,
}

/// Something that happened at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// The route moved to another candidate.
    Switch,
    /// A person's action (retry now, skip now, cancel a wait, stop).
    Manual,
    /// The route stopped for a person.
    NeedsPerson,
    Completed,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub lane: usize,
    pub x: f64,
    pub width: f64,
    pub kind: BarKind,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    pub lane: usize,
    pub x: f64,
    pub width: f64,
    pub kind: GapKind,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub lane: usize,
    pub x: f64,
    pub kind: MarkerKind,
    pub text: String,
}

/// The laid-out picture, and its text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Layout {
    pub width: f64,
    pub height: f64,
    pub lanes: Vec<String>,
    pub bars: Vec<Bar>,
    pub gaps: Vec<Gap>,
    pub markers: Vec<Marker>,
    /// Start and end of the axis, with their positions.
    pub ticks: Vec<(f64, String)>,
    /// Every item in words, in time order: the text equivalent.
    pub text: Vec<String>,
}

/// Maps instants to x positions: every instant given is a break, and consecutive breaks are
/// `8 + 24·ln(1 + seconds)` px apart.
struct Axis {
    breaks: Vec<(DateTime<Utc>, f64)>,
}

impl Axis {
    fn new(mut instants: Vec<DateTime<Utc>>) -> Axis {
        instants.sort();
        instants.dedup();
        let mut x = LEFT;
        let mut breaks = Vec::with_capacity(instants.len());
        let mut last: Option<DateTime<Utc>> = None;
        for t in instants {
            if let Some(prev) = last {
                let secs = (t - prev).num_milliseconds().max(0) as f64 / 1000.0;
                x += 8.0 + 24.0 * (1.0 + secs).ln();
            }
            breaks.push((t, x));
            last = Some(t);
        }
        Axis { breaks }
    }

    fn x(&self, t: DateTime<Utc>) -> f64 {
        match self.breaks.binary_search_by(|(b, _)| b.cmp(&t)) {
            Ok(i) => self.breaks[i].1,
            Err(i) => self.breaks.get(i).or(self.breaks.last()).map_or(LEFT, |b| b.1),
        }
    }

    fn end(&self) -> f64 {
        self.breaks.last().map_or(LEFT, |b| b.1)
    }
}

/// Lays out `detail`.
pub fn layout(detail: &RouteDetail) -> Layout {
    let mut lanes: Vec<String> = Vec::new();
    let mut lane = |id: &str| match lanes.iter().position(|l| l == id) {
        Some(i) => i,
        None => {
            lanes.push(id.to_owned());
            lanes.len() - 1
        }
    };
    // Every instant the picture shows.
    let mut instants: Vec<DateTime<Utc>> = vec![detail.route.created_at, detail.route.updated_at];
    for h in &detail.history {
        instants.push(h.at);
        instants.extend(h.decision.as_ref().and_then(|d| d.deadline));
    }
    for d in &detail.dispatches {
        instants.extend(d.started_at);
        instants.extend(d.settled_at);
    }
    let latest = instants.iter().copied().max().unwrap_or(detail.route.created_at);
    let axis = Axis::new(instants);
    let mut out = Layout::default();
    let mut text: Vec<(DateTime<Utc>, String)> = Vec::new();

    for d in &detail.dispatches {
        let Some(start) = d.started_at else { continue };
        let kind = match (d.status, d.outcome) {
            (_, Some(DispatchOutcome::Succeeded)) => BarKind::Succeeded,
            (_, Some(DispatchOutcome::Failed)) => BarKind::Failed,
            (_, Some(DispatchOutcome::Aborted)) => BarKind::Aborted,
            (_, Some(DispatchOutcome::Superseded)) => BarKind::Superseded,
            (_, Some(DispatchOutcome::Ambiguous)) => BarKind::Ambiguous,
            (DispatchStatus::Started | DispatchStatus::Scheduled, None) | (DispatchStatus::Settled, None) => {
                BarKind::Running
            }
        };
        let end = d.settled_at.unwrap_or(latest);
        let x = axis.x(start);
        let words = format!(
            "Attempt {} on {}: from {} to {}, {}.",
            d.attempt,
            d.candidate_id,
            format_utc(start),
            if d.settled_at.is_some() {
                format_utc(end)
            } else {
                "now".to_owned()
            },
            kind.word()
        );
        text.push((start, words.clone()));
        out.bars.push(Bar {
            lane: lane(&d.candidate_id),
            x,
            width: (axis.x(end) - x).max(MIN_BAR),
            kind,
            text: words,
        });
    }

    let mut previous_candidate: Option<&str> = None;
    for h in &detail.history {
        let at_x = axis.x(h.at);
        let l = lane(&h.candidate_id);
        if let (Some(deadline), true) = (
            h.decision.as_ref().and_then(|d| d.deadline),
            matches!(h.to, StateName::RetryWait | StateName::WaitingForReset),
        ) {
            let kind = if h.to == StateName::RetryWait {
                GapKind::Retry
            } else {
                GapKind::Reset
            };
            let words = format!(
                "{} on {}: from {} until {}.",
                if kind == GapKind::Retry {
                    "Retry wait"
                } else {
                    "Reset wait"
                },
                h.candidate_id,
                format_utc(h.at),
                format_utc(deadline)
            );
            text.push((h.at, words.clone()));
            out.gaps.push(Gap {
                lane: l,
                x: at_x,
                width: (axis.x(deadline) - at_x).max(1.0),
                kind,
                text: words,
            });
        }
        let marker = match h.event {
            EventKind::RetryNow | EventKind::SkipNow | EventKind::CancelWait | EventKind::Stop => Some((
                MarkerKind::Manual,
                format!("A person chose “{}”", h.event.as_str().replace('_', " ")),
            )),
            _ if h.to == StateName::ActionRequired => {
                Some((MarkerKind::NeedsPerson, "Stopped for a person".to_owned()))
            }
            _ if h.to == StateName::Completed => Some((MarkerKind::Completed, "Completed".to_owned())),
            _ if previous_candidate.is_some_and(|p| p != h.candidate_id) => {
                Some((MarkerKind::Switch, format!("Switched to {}", h.candidate_id)))
            }
            _ => None,
        };
        if let Some((kind, what)) = marker {
            let words = format!("{what} at {} ({}).", format_utc(h.at), state_label(h.to));
            text.push((h.at, words.clone()));
            out.markers.push(Marker {
                lane: l,
                x: at_x,
                kind,
                text: words,
            });
        }
        previous_candidate = Some(h.candidate_id.as_str());
    }

    text.sort_by_key(|(t, _)| *t);
    out.text = text.into_iter().map(|(_, s)| s).collect();
    out.width = axis.end() + RIGHT;
    out.height = lanes.len() as f64 * LANE_HEIGHT + AXIS_HEIGHT;
    out.ticks = vec![
        (LEFT, format_utc(detail.route.created_at)),
        (axis.end(), format_utc(latest)),
    ];
    out.lanes = lanes;
    out
}

/// The route's timeline: the picture and its text equivalent.
#[component]
pub fn Timeline(detail: RouteDetail) -> impl IntoView {
    let l = layout(&detail);
    let lane_top = |i: usize| i as f64 * LANE_HEIGHT;
    let axis_y = l.lanes.len() as f64 * LANE_HEIGHT + 4.0;
    let last_tick = l.ticks.len().saturating_sub(1);
    view! {
        <section aria-labelledby="timeline-heading" class="mt-6" data-testid="timeline">
            <h2 id="timeline-heading" class="text-lg font-semibold">"Timeline"</h2>
            <p class="text-sm text-slate-700">
                "One lane per candidate: attempts as bars (green succeeded, red failed, blue running, grey \
                 aborted or never started, amber unknown), waits as dashed lines up to their deadline, and \
                 marks where the route switched, a person acted, or it stopped for a person. Longer waits are \
                 drawn longer, but not to scale."
            </p>
            <div
                class="mt-2 w-full max-w-full overflow-x-auto rounded-lg border border-slate-300 bg-white"
                tabindex="0"
                role="group"
                aria-label="Timeline picture (scrolls sideways)"
            >
                <svg
                    role="img"
                    aria-labelledby="timeline-heading"
                    aria-describedby="timeline-text"
                    width=format!("{:.0}", l.width)
                    height=format!("{:.0}", l.height)
                    viewBox=format!("0 0 {:.0} {:.0}", l.width, l.height)
                    class="block"
                >
                    {l.lanes.iter().enumerate().map(|(i, name)| view! {
                        <g data-lane=name.clone()>
                            <line x1="0" x2=format!("{:.0}", l.width) y1=format!("{:.1}", lane_top(i) + LANE_HEIGHT) y2=format!("{:.1}", lane_top(i) + LANE_HEIGHT) stroke="#e2e8f0" />
                            <text x=LEFT.to_string() y=format!("{:.1}", lane_top(i) + LABEL_OFFSET) font-size="12" fill="#0f172a">{name.clone()}</text>
                        </g>
                    }).collect_view()}
                    {l.gaps.iter().map(|g| {
                        let y = lane_top(g.lane) + BAR_OFFSET + BAR_HEIGHT / 2.0;
                        let colour = if g.kind == GapKind::Retry { "#b45309" } else { "#6d28d9" };
                        view! {
                            <g data-gap={if g.kind == GapKind::Retry { "retry" } else { "reset" }}>
                                <title>{g.text.clone()}</title>
                                <line x1=format!("{:.1}", g.x) x2=format!("{:.1}", g.x + g.width) y1=format!("{y:.1}") y2=format!("{y:.1}") stroke=colour stroke-width="2" stroke-dasharray="4 3" />
                                <line x1=format!("{:.1}", g.x + g.width) x2=format!("{:.1}", g.x + g.width) y1=format!("{:.1}", y - 7.0) y2=format!("{:.1}", y + 7.0) stroke=colour stroke-width="2" />
                            </g>
                        }
                    }).collect_view()}
                    {l.bars.iter().map(|b| view! {
                        <rect
                            data-bar=b.kind.word()
                            x=format!("{:.1}", b.x)
                            y=format!("{:.1}", lane_top(b.lane) + BAR_OFFSET)
                            width=format!("{:.1}", b.width)
                            height=BAR_HEIGHT.to_string()
                            rx="3"
                            fill=b.kind.colour()
                        >
                            <title>{b.text.clone()}</title>
                        </rect>
                    }).collect_view()}
                    {l.markers.iter().map(|m| {
                        let y = lane_top(m.lane) + BAR_OFFSET + BAR_HEIGHT / 2.0;
                        let (shape, colour) = match m.kind {
                            MarkerKind::Switch => ("switch", "#4338ca"),
                            MarkerKind::Manual => ("manual", "#0f172a"),
                            MarkerKind::NeedsPerson => ("needs-person", "#b91c1c"),
                            MarkerKind::Completed => ("completed", "#047857"),
                        };
                        // A diamond for a switch, a circle for a person's action, a square
                        // for a stop or the end: told apart without colour too.
                        let x = m.x;
                        let outline = match m.kind {
                            MarkerKind::Switch => format!("M{x:.1},{:.1} l7,11 l-7,11 l-7,-11 z", y - 11.0),
                            MarkerKind::Manual => format!("M{:.1},{y:.1} a7,7 0 1,0 14,0 a7,7 0 1,0 -14,0", x - 7.0),
                            MarkerKind::NeedsPerson | MarkerKind::Completed => {
                                format!("M{:.1},{:.1} h14 v14 h-14 z", x - 7.0, y - 7.0)
                            }
                        };
                        view! {
                            <path data-marker=shape d=outline fill="white" stroke=colour stroke-width="2.5">
                                <title>{m.text.clone()}</title>
                            </path>
                        }
                    }).collect_view()}
                    <line x1=LEFT.to_string() x2=format!("{:.1}", l.width - RIGHT) y1=format!("{axis_y:.1}") y2=format!("{axis_y:.1}") stroke="#94a3b8" />
                    {l.ticks.iter().enumerate().map(|(i, (x, label))| view! {
                        <text
                            x=format!("{x:.1}")
                            y=format!("{:.1}", axis_y + 18.0)
                            font-size="11"
                            fill="#334155"
                            text-anchor={if i == last_tick && i > 0 { "end" } else { "start" }}
                        >
                            {label.clone()}
                        </text>
                    }).collect_view()}
                </svg>
            </div>
            <ol id="timeline-text" class="sr-only" data-testid="timeline-text">
                {l.text.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}
            </ol>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;
    use policy::{
        api::DispatcherKind,
        api::{Caller, CallerKind, DispatchRecord, HistoryEntry, RouteSummary},
        classification::ClassState,
        evaluator::{Decision, DecisionKind, DecisionReason},
        route::{start, AttemptKind, CandidateOption},
    };

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap() + TimeDelta::seconds(secs)
    }

    fn entry(
        seq: u64,
        secs: i64,
        event: EventKind,
        to: StateName,
        candidate: &str,
        deadline: Option<i64>,
    ) -> HistoryEntry {
        HistoryEntry {
            seq,
            at: t(secs),
            event,
            from: None,
            to,
            generation: seq,
            candidate_id: candidate.into(),
            attempt: None,
            profile_revision: 1,
            decision: deadline.map(|d| Decision {
                kind: DecisionKind::Retry,
                reason: DecisionReason::RetryBudgetRemaining,
                decided_at: t(secs),
                deadline: Some(t(d)),
                delay_seconds: None,
                retry_ordinal: Some(1),
                max_retries: 3,
                on_exhausted: None,
                wait_skipped: None,
                gate_reason: None,
                unclassified_reason: None,
                code: None,
                class: ClassState::Transient,
                catalogue_version: "v".into(),
                classifier_rule: None,
                policy: None,
            }),
            classification: None,
        }
    }

    fn dispatch(
        attempt: u32,
        candidate: &str,
        start: i64,
        end: Option<i64>,
        outcome: Option<DispatchOutcome>,
    ) -> DispatchRecord {
        DispatchRecord {
            attempt,
            candidate_id: candidate.into(),
            kind: AttemptKind::Initial,
            dispatcher: DispatcherKind::Simulated,
            scheduled_generation: 1,
            invocation_generation: Some(1),
            status: if outcome.is_some() {
                DispatchStatus::Settled
            } else {
                DispatchStatus::Started
            },
            outcome,
            scheduled_at: t(start),
            started_at: Some(t(start)),
            settled_at: end.map(t),
        }
    }

    fn detail(history: Vec<HistoryEntry>, dispatches: Vec<DispatchRecord>) -> RouteDetail {
        RouteDetail {
            route: RouteSummary {
                id: "r1".into(),
                profile_id: "p1".into(),
                profile_name: "p".into(),
                caller: Caller {
                    kind: CallerKind::KanbanTask,
                    reference: "task".into(),
                    invocation_id: "inv".into(),
                },
                title: None,
                snapshot: start(&[CandidateOption::now("main")]).unwrap().next.snapshot(),
                durable_error: None,
                created_at: t(0),
                updated_at: t(40),
            },
            history,
            dispatches,
        }
    }

    #[test]
    fn a_failure_a_retry_wait_and_a_switch_read_in_order_on_two_lanes() {
        let d = detail(
            vec![
                entry(1, 0, EventKind::Started, StateName::Active, "main", None),
                entry(2, 2, EventKind::Failed, StateName::RetryWait, "main", Some(7)),
                entry(3, 9, EventKind::Failed, StateName::Switching, "main", None),
                entry(
                    4,
                    9,
                    EventKind::CandidatesEvaluated,
                    StateName::Active,
                    "backup",
                    None,
                ),
            ],
            vec![
                dispatch(1, "main", 0, Some(2), Some(DispatchOutcome::Failed)),
                dispatch(2, "main", 7, Some(9), Some(DispatchOutcome::Failed)),
                dispatch(3, "backup", 9, None, None),
            ],
        );
        let l = layout(&d);
        assert_eq!(l.lanes, vec!["main".to_string(), "backup".to_string()]);
        let kinds: Vec<_> = l.bars.iter().map(|b| (b.lane, b.kind)).collect();
        assert_eq!(
            kinds,
            vec![(0, BarKind::Failed), (0, BarKind::Failed), (1, BarKind::Running)]
        );
        assert_eq!(l.gaps.len(), 1);
        assert_eq!(l.gaps[0].kind, GapKind::Retry);
        assert!(l.gaps[0].x < l.bars[1].x + 0.01 && l.gaps[0].x + l.gaps[0].width <= l.bars[1].x + 0.01);
        assert_eq!(
            l.markers.iter().map(|m| m.kind).collect::<Vec<_>>(),
            vec![MarkerKind::Switch]
        );
        assert!(
            l.text.iter().any(|t| t.starts_with("Retry wait on main")),
            "{:?}",
            l.text
        );
        assert!(l.text.last().unwrap().contains("backup"), "{:?}", l.text);
        // Bars never run backwards and the picture holds them all.
        assert!(l
            .bars
            .iter()
            .all(|b| b.width >= MIN_BAR && b.x + b.width <= l.width));
    }

    #[test]
    fn a_week_long_wait_does_not_squeeze_a_one_second_attempt_away() {
        let d = detail(
            vec![
                entry(1, 0, EventKind::Started, StateName::Active, "main", None),
                entry(
                    2,
                    1,
                    EventKind::Failed,
                    StateName::RetryWait,
                    "main",
                    Some(7 * 86_400),
                ),
            ],
            vec![dispatch(1, "main", 0, Some(1), Some(DispatchOutcome::Failed))],
        );
        let l = layout(&d);
        assert!(l.bars[0].width >= MIN_BAR);
        assert!(l.gaps[0].width > l.bars[0].width * 10.0, "{l:?}");
        assert!(l.width < 2_000.0, "{}", l.width);
    }

    #[test]
    fn a_person_s_stop_and_the_stop_for_a_person_are_marked() {
        let d = detail(
            vec![
                entry(1, 0, EventKind::Started, StateName::Active, "main", None),
                entry(2, 5, EventKind::Stop, StateName::ActionRequired, "main", None),
            ],
            vec![dispatch(1, "main", 0, Some(5), Some(DispatchOutcome::Aborted))],
        );
        let l = layout(&d);
        assert_eq!(l.markers.len(), 1);
        assert_eq!(l.markers[0].kind, MarkerKind::Manual);
        assert_eq!(l.bars[0].kind, BarKind::Aborted);
    }
}
