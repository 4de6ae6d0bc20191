//! The catalogue: rules as data, compiled once.
//!
//! Rules live in TOML under `fixtures/catalogue/`, one file per provider or agent, and are
//! embedded with `include_str!` so the `recourse` binary reads no files at run time. They are
//! parsed and compiled (one literal scanner over every literal) once, into a [`Catalogue`];
//! [`Catalogue::builtin`] caches that in a `OnceLock`. A rule's regex is compiled the first
//! time a signal reaches it ([`crate::lazy_regex`]).
//!
//! **Version.** The catalogue version is `cat-` plus the first 12 hex digits of the SHA-256 of
//! every source file (its name, a NUL, its text, a NUL, in file order). Any edit to a rule
//! changes it, with nothing to remember to bump; historical attempts keep the version they were
//! classified with. (A comment-only edit changes it too: cheap, and never wrong.)
//!
//! **Tiers.** `structured` (a field that names the cause: an error type or code, a gRPC status,
//! `RetryInfo`/`QuotaFailure`, a JSON-RPC code, an exit code, a stop reason) outranks `exact`
//! (a provider's or agent's exact message) which outranks `broad` (a bare HTTP status, or a
//! broad text pattern). See the engine for how ties resolve.

use crate::{
    engine::{json_any, MatchCtx},
    lazy_regex::LazyRegex,
    scan::LiteralScanner,
    timing::TimingExtractor,
};
use policy::{
    class::SemanticCode,
    classification::{Confidence, Scope},
};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::{collections::BTreeMap, fmt, sync::OnceLock};

/// The embedded catalogue sources, in a fixed order (part of the version hash).
pub const BUILTIN_SOURCES: &[(&str, &str)] = &[
    (
        "anthropic.toml",
        include_str!("../../fixtures/catalogue/anthropic.toml"),
    ),
    (
        "openai.toml",
        include_str!("../../fixtures/catalogue/openai.toml"),
    ),
    (
        "google.toml",
        include_str!("../../fixtures/catalogue/google.toml"),
    ),
    (
        "bedrock.toml",
        include_str!("../../fixtures/catalogue/bedrock.toml"),
    ),
    (
        "gateways.toml",
        include_str!("../../fixtures/catalogue/gateways.toml"),
    ),
    (
        "agents.toml",
        include_str!("../../fixtures/catalogue/agents.toml"),
    ),
    (
        "network.toml",
        include_str!("../../fixtures/catalogue/network.toml"),
    ),
    (
        "process.toml",
        include_str!("../../fixtures/catalogue/process.toml"),
    ),
    ("http.toml", include_str!("../../fixtures/catalogue/http.toml")),
    (
        "not-provider.toml",
        include_str!("../../fixtures/catalogue/not-provider.toml"),
    ),
];

/// How specific a rule is. Higher tiers win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Broad,
    Exact,
    Structured,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Broad => "broad",
            Tier::Exact => "exact",
            Tier::Structured => "structured",
        }
    }
}

/// Which piece of evidence a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// An HTTP response: status, headers, body.
    Http,
    /// A JSON-RPC error from ACP (an error response, or the prompt's error).
    AcpError,
    /// One run of consecutive `agent_message_chunk` updates, joined.
    AcpMessage,
    /// The prompt's final result (`stopReason`).
    AcpResult,
    /// One stderr line.
    Stderr,
    /// The process exit (code, signal).
    Exit,
}

impl SignalKind {
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// What a rule concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Code(SemanticCode),
    /// Task, repository, permission, local runtime, cancellation or resume-state errors.
    NotProviderError,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Code(c) => f.write_str(c.as_str()),
            Outcome::NotProviderError => f.write_str("not_provider_error"),
        }
    }
}

/// One rule as written in TOML.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDef {
    id: String,
    tier: Tier,
    /// A semantic code, or `not_provider_error`.
    code: String,
    confidence: Confidence,
    #[serde(default)]
    scope: Option<Scope>,
    /// Free text for people: what this is and where it was seen.
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    kinds: Vec<SignalKind>,
    #[serde(default)]
    status: Vec<u16>,
    #[serde(default)]
    rpc_code: Vec<i64>,
    #[serde(default)]
    exit_code: Vec<i64>,
    #[serde(default)]
    exit_signal: Vec<String>,
    #[serde(default)]
    stop_reason: Vec<String>,
    #[serde(default)]
    cancel_requested: Option<bool>,
    /// For `acp_result`: `true` matches a result whose usage says the turn used no tokens at
    /// all, `false` one whose usage says it did or that reports no usage.
    #[serde(default)]
    zero_usage: Option<bool>,
    /// An agent's own notice in its message stream (a warning it prints as an
    /// `agent_message_chunk` before the answer): the text its `regex` matches is not assistant
    /// output. It must look only at `acp_message`, conclude `not_provider_error` and have a
    /// `regex`.
    #[serde(default)]
    notice: bool,
    #[serde(default)]
    agents: Vec<String>,
    #[serde(default)]
    providers: Vec<String>,
    /// Header name -> accepted values (`"*"` means present with any value).
    #[serde(default)]
    headers: BTreeMap<String, OneOrMany>,
    /// JSON path -> accepted values (exact).
    #[serde(default)]
    json: BTreeMap<String, OneOrMany>,
    /// JSON path -> substrings (case-insensitive; any one suffices).
    #[serde(default)]
    json_contains: BTreeMap<String, OneOrMany>,
    /// Literals that must all appear (ASCII case-insensitive).
    #[serde(default)]
    contains: Vec<String>,
    /// Literals of which at least one must appear.
    #[serde(default)]
    contains_any: Vec<String>,
    /// Literals any of which vetoes the rule.
    #[serde(default)]
    unless: Vec<String>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    timing: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    #[serde(default)]
    rule: Vec<RuleDef>,
}

/// A compiled JSON path: `error.details.*.@type`. A key applied to an array applies to each
/// element, so `error.type` also reads `[{"error":{...}}]`, the shape of Gemini stream errors.
#[derive(Debug, Clone)]
pub(crate) struct JsonPath {
    pub(crate) segs: Vec<Seg>,
}

#[derive(Debug, Clone)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
    Any,
}

impl JsonPath {
    fn parse(text: &str) -> Result<JsonPath, String> {
        if text.is_empty() {
            return Err("empty JSON path".into());
        }
        let segs = text
            .split('.')
            .map(|s| {
                if s.is_empty() {
                    Err(format!("empty segment in JSON path `{text}`"))
                } else if s == "*" {
                    Ok(Seg::Any)
                } else if let Ok(i) = s.parse::<usize>() {
                    Ok(Seg::Index(i))
                } else {
                    Ok(Seg::Key(s.to_owned()))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(JsonPath { segs })
    }
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub tier: Tier,
    pub outcome: Outcome,
    pub confidence: Confidence,
    pub scope: Option<Scope>,
    /// The file the rule came from (e.g. `anthropic.toml`); used for per-source counts.
    pub source: String,
    pub(crate) kinds: Vec<SignalKind>,
    pub(crate) status: Vec<u16>,
    pub(crate) rpc_code: Vec<i64>,
    pub(crate) exit_code: Vec<i64>,
    pub(crate) exit_signal: Vec<String>,
    pub(crate) stop_reason: Vec<String>,
    pub(crate) cancel_requested: Option<bool>,
    pub(crate) zero_usage: Option<bool>,
    /// See `RuleDef::notice`: the matched text is not output (`crate::engine`).
    pub(crate) notice: bool,
    pub(crate) agents: Vec<String>,
    pub(crate) providers: Vec<String>,
    pub(crate) headers: Vec<(String, Vec<String>)>,
    pub(crate) json: Vec<(JsonPath, Vec<String>)>,
    pub(crate) json_contains: Vec<(JsonPath, Vec<String>)>,
    /// Indices into the catalogue's literal table.
    pub(crate) contains: Vec<usize>,
    pub(crate) contains_any: Vec<usize>,
    pub(crate) unless: Vec<usize>,
    /// Prefilters derived from `json`/`json_contains` values: for each group, one of these
    /// literals must occur in the text before any JSON is parsed (see [`json_hint_literal`]).
    pub(crate) json_hints: Vec<Vec<usize>>,
    pub(crate) regex: Option<LazyRegex>,
    pub(crate) timing: Vec<TimingExtractor>,
}

impl Rule {
    /// Whether this rule matches one signal. Cheap conditions first; the regex last.
    pub(crate) fn matches(&self, ctx: &MatchCtx<'_, '_>) -> bool {
        let s = ctx.signal;
        if !self.status.is_empty() && !s.status.is_some_and(|st| self.status.contains(&st)) {
            return false;
        }
        if !self.rpc_code.is_empty() && !s.rpc_code.is_some_and(|c| self.rpc_code.contains(&c)) {
            return false;
        }
        if !self.exit_code.is_empty() && !s.exit_code.is_some_and(|c| self.exit_code.contains(&c)) {
            return false;
        }
        if !self.exit_signal.is_empty()
            && !s
                .exit_signal
                .is_some_and(|g| self.exit_signal.iter().any(|x| x == g))
        {
            return false;
        }
        if !self.stop_reason.is_empty()
            && !s
                .stop_reason
                .is_some_and(|r| self.stop_reason.iter().any(|x| x == r))
        {
            return false;
        }
        if let Some(c) = self.cancel_requested {
            if ctx.envelope.cancel_requested != c {
                return false;
            }
        }
        if self.zero_usage.is_some_and(|z| z != s.zero_usage) {
            return false;
        }
        if !self.agents.is_empty()
            && !ctx
                .envelope
                .agent
                .as_deref()
                .is_some_and(|a| self.agents.iter().any(|x| x.eq_ignore_ascii_case(a)))
        {
            return false;
        }
        if !self.providers.is_empty()
            && !ctx
                .envelope
                .provider_id
                .as_deref()
                .is_some_and(|p| self.providers.iter().any(|x| x.eq_ignore_ascii_case(p)))
        {
            return false;
        }
        if !self.contains.iter().all(|&i| ctx.found.has(i)) {
            return false;
        }
        if !self.contains_any.is_empty() && !self.contains_any.iter().any(|&i| ctx.found.has(i)) {
            return false;
        }
        if self.unless.iter().any(|&i| ctx.found.has(i)) {
            return false;
        }
        for (name, accepted) in &self.headers {
            let Some(v) = s.headers.and_then(|h| h.get(name.as_str())) else {
                return false;
            };
            if !accepted
                .iter()
                .any(|a| a == "*" || a.eq_ignore_ascii_case(v.trim()))
            {
                return false;
            }
        }
        if !self
            .json_hints
            .iter()
            .all(|group| group.iter().any(|&i| ctx.found.has(i)))
        {
            return false;
        }
        for (path, accepted) in &self.json {
            let hit = ctx
                .json
                .roots()
                .any(|root| json_any(root, &path.segs, &mut |v| accepted.iter().any(|a| a == v)));
            if !hit {
                return false;
            }
        }
        for (path, needles) in &self.json_contains {
            let hit = ctx.json.roots().any(|root| {
                json_any(root, &path.segs, &mut |v| {
                    needles.iter().any(|n| contains_ignore_ascii_case(v, n))
                })
            });
            if !hit {
                return false;
            }
        }
        if let Some(re) = &self.regex {
            if !re.get().is_match(&s.text) {
                return false;
            }
        }
        true
    }

    /// Where in the signal text this rule's evidence starts (for telling a failure message
    /// apart from real output written before it).
    pub(crate) fn match_start(&self, ctx: &MatchCtx<'_, '_>) -> Option<usize> {
        let lits = self
            .contains
            .iter()
            .chain(&self.contains_any)
            .filter_map(|&i| ctx.found.pos(i));
        let re = self
            .regex
            .as_ref()
            .and_then(|r| r.get().find(&ctx.signal.text))
            .map(|m| m.start());
        let start = lits.chain(re).min();
        // Evidence inside the JSON object found in the text starts where that object starts
        // (the agent's banner, `[API Error: [{`, is on its first line); a rule that matched on
        // JSON alone points at the object too.
        let span = ctx.json.embedded_span();
        let json_rule = !self.json.is_empty() || !self.json_contains.is_empty();
        match (start, span) {
            (Some(p), Some((s, e))) if (s..e).contains(&p) => Some(s),
            (None, Some((s, _))) if json_rule => Some(s),
            (p, _) => p,
        }
    }
}

pub(crate) fn contains_ignore_ascii_case(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// A compiled catalogue. Immutable; share it by reference.
#[derive(Debug, Clone)]
pub struct Catalogue {
    version: String,
    pub(crate) rules: Vec<Rule>,
    /// Lower-cased literal table shared by all rules.
    pub(crate) literals: Vec<String>,
    /// Finds every literal in a text in one pass (see [`crate::scan`]).
    pub(crate) scanner: LiteralScanner,
    /// For each signal kind, the rules that look at it.
    pub(crate) by_kind: [Vec<usize>; 6],
    /// For each signal kind, the rules with no literal trigger: always checked.
    pub(crate) untriggered: [Vec<usize>; 6],
    /// For each literal, the rules it triggers (a rule needs one of its triggers to match),
    /// each with the signal kinds it looks at as a bit set (bit [`SignalKind::index`]).
    pub(crate) triggers: Vec<Vec<(usize, u8)>>,
}

/// Everything wrong with a catalogue's sources, all at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("catalogue has {} problem(s): {}", .0.len(), .0.join("; "))]
pub struct CatalogueError(pub Vec<String>);

impl Catalogue {
    /// The catalogue embedded in this binary, compiled on first use.
    pub fn builtin() -> &'static Catalogue {
        static BUILTIN: OnceLock<Catalogue> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            // The embedded sources are constants checked by this crate's tests and by
            // `recourse catalogue check`; a failure here is a build defect, not bad input.
            #[allow(clippy::expect_used)]
            Catalogue::compile(BUILTIN_SOURCES, false).expect("the embedded catalogue compiles")
        })
    }

    /// Parses one TOML document (used by tests and tools).
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(toml_text: &str) -> Result<Catalogue, CatalogueError> {
        Catalogue::from_sources(&[("inline.toml", toml_text)])
    }

    /// Parses and compiles several named TOML sources; reports every problem found.
    pub fn from_sources(sources: &[(&str, &str)]) -> Result<Catalogue, CatalogueError> {
        Catalogue::compile(sources, true)
    }

    /// [`Catalogue::from_sources`]; with `check_regexes` false, each rule's regex is first
    /// compiled when a signal reaches it, and never before ([`LazyRegex`]).
    fn compile(sources: &[(&str, &str)], check_regexes: bool) -> Result<Catalogue, CatalogueError> {
        let mut problems = Vec::new();
        let mut hasher = Sha256::new();
        let mut defs = Vec::new();
        for (name, text) in sources {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
            hasher.update([0]);
            match toml::from_str::<FileDef>(text) {
                Ok(f) => defs.extend(f.rule.into_iter().map(|r| ((*name).to_owned(), r))),
                Err(e) => problems.push(format!("{name}: {}", e.message())),
            }
        }
        let digest = hasher.finalize();
        let version = format!(
            "cat-{}",
            digest
                .iter()
                .take(6)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );

        let mut literals: Vec<String> = Vec::new();
        let mut intern = |s: &str, rule: &str, problems: &mut Vec<String>| -> usize {
            let lower = s.to_ascii_lowercase();
            if lower.trim().is_empty() {
                problems.push(format!("{rule}: empty literal"));
            }
            if let Some(i) = literals.iter().position(|l| *l == lower) {
                i
            } else {
                literals.push(lower);
                literals.len() - 1
            }
        };
        let mut rules = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (source, d) in defs {
            let id = d.id.clone();
            if !valid_id(&id) {
                problems.push(format!(
                    "{source}: rule id `{id}` must be lower-case words joined by `.` or `-`"
                ));
            }
            if !seen.insert(id.clone()) {
                problems.push(format!("{source}: duplicate rule id `{id}`"));
            }
            let outcome = if d.code == "not_provider_error" {
                Outcome::NotProviderError
            } else if let Some(c) = SemanticCode::parse(&d.code) {
                Outcome::Code(c)
            } else {
                problems.push(format!("{id}: unknown code `{}`", d.code));
                continue;
            };
            if d.kinds.is_empty() {
                problems.push(format!("{id}: `kinds` must name at least one kind of evidence"));
            }
            let has_condition = !(d.status.is_empty()
                && d.rpc_code.is_empty()
                && d.exit_code.is_empty()
                && d.exit_signal.is_empty()
                && d.stop_reason.is_empty()
                && d.cancel_requested.is_none()
                && d.zero_usage.is_none()
                && d.headers.is_empty()
                && d.json.is_empty()
                && d.json_contains.is_empty()
                && d.contains.is_empty()
                && d.contains_any.is_empty()
                && d.regex.is_none());
            if !has_condition {
                problems.push(format!(
                    "{id}: a rule needs at least one match condition besides `kinds`"
                ));
            }
            if d.notice
                && (d.kinds != [SignalKind::AcpMessage]
                    || outcome != Outcome::NotProviderError
                    || d.regex.is_none())
            {
                problems.push(format!(
                    "{id}: a notice looks only at `acp_message`, concludes `not_provider_error` and has a `regex`"
                ));
            }
            let regex = match &d.regex {
                Some(r) if !check_regexes => Some(LazyRegex::unchecked(r)),
                Some(r) => match LazyRegex::checked(r) {
                    Ok(re) => Some(re),
                    Err(e) => {
                        problems.push(format!("{id}: invalid regex: {e}"));
                        None
                    }
                },
                None => None,
            };
            let mut json = Vec::new();
            for (p, v) in d.json {
                match JsonPath::parse(&p) {
                    Ok(path) => json.push((path, v.into_vec())),
                    Err(e) => problems.push(format!("{id}: {e}")),
                }
            }
            let mut json_contains = Vec::new();
            for (p, v) in d.json_contains {
                match JsonPath::parse(&p) {
                    Ok(path) => json_contains.push((path, v.into_vec())),
                    Err(e) => problems.push(format!("{id}: {e}")),
                }
            }
            let mut timing = Vec::new();
            for t in &d.timing {
                match TimingExtractor::parse(t) {
                    Some(x) => timing.push(x),
                    None => problems.push(format!("{id}: unknown timing extractor `{t}`")),
                }
            }
            // A JSON value can only match if its text is in the evidence (bodies and error
            // objects are matched as text too), so identifier-like values double as literal
            // prefilters and spare the JSON parse on most signals.
            let json_hints: Vec<Vec<usize>> = json
                .iter()
                .chain(&json_contains)
                .filter(|(_, values)| values.iter().all(|v| json_hint_literal(v)))
                .map(|(_, values)| values.iter().map(|v| intern(v, &id, &mut problems)).collect())
                .collect();
            let rule = Rule {
                contains: d.contains.iter().map(|s| intern(s, &id, &mut problems)).collect(),
                contains_any: d
                    .contains_any
                    .iter()
                    .map(|s| intern(s, &id, &mut problems))
                    .collect(),
                unless: d.unless.iter().map(|s| intern(s, &id, &mut problems)).collect(),
                json_hints,
                id,
                tier: d.tier,
                outcome,
                confidence: d.confidence,
                scope: d.scope,
                source: source.clone(),
                kinds: d.kinds,
                status: d.status,
                rpc_code: d.rpc_code,
                exit_code: d.exit_code,
                exit_signal: d.exit_signal.iter().map(|s| s.to_ascii_uppercase()).collect(),
                stop_reason: d.stop_reason,
                cancel_requested: d.cancel_requested,
                zero_usage: d.zero_usage,
                notice: d.notice,
                agents: d.agents,
                providers: d.providers,
                headers: d
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.into_vec()))
                    .collect(),
                json,
                json_contains,
                regex,
                timing,
            };
            rules.push(rule);
        }
        let scanner = match LiteralScanner::new(&literals) {
            Ok(a) => a,
            Err(e) => {
                problems.push(format!("literal automaton: {e}"));
                return Err(CatalogueError(problems));
            }
        };
        if !problems.is_empty() {
            return Err(CatalogueError(problems));
        }
        let mut cat = Catalogue {
            version,
            rules,
            literals,
            scanner,
            by_kind: Default::default(),
            untriggered: Default::default(),
            triggers: Vec::new(),
        };
        cat.index();
        Ok(cat)
    }

    fn index(&mut self) {
        for k in self.by_kind.iter_mut().chain(self.untriggered.iter_mut()) {
            k.clear();
        }
        self.triggers = vec![Vec::new(); self.literals.len()];
        for (i, r) in self.rules.iter().enumerate() {
            for k in &r.kinds {
                if !self.by_kind[k.index()].contains(&i) {
                    self.by_kind[k.index()].push(i);
                }
            }
            // Literals one of which must be present for the rule to match. Any single
            // `contains` literal is required; otherwise one of `contains_any`, or of a JSON hint.
            let trigger: &[usize] = if let Some(first) = r.contains.first() {
                std::slice::from_ref(first)
            } else if !r.contains_any.is_empty() {
                &r.contains_any
            } else if let Some(group) = r.json_hints.first() {
                group
            } else {
                &[]
            };
            if trigger.is_empty() {
                for k in &r.kinds {
                    if !self.untriggered[k.index()].contains(&i) {
                        self.untriggered[k.index()].push(i);
                    }
                }
            }
            let kinds = r.kinds.iter().fold(0u8, |m, k| m | 1 << k.index());
            for &lit in trigger {
                if !self.triggers[lit].iter().any(|&(r, _)| r == i) {
                    self.triggers[lit].push((i, kinds));
                }
            }
        }
    }

    /// `cat-` and 12 hex digits of the sources' SHA-256.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The catalogue's literals, lower-cased (every `contains`, `contains_any`, `unless` and
    /// JSON hint). Exists for the benchmark, which compares the literal scan with
    /// `aho-corasick` over the same set.
    #[doc(hidden)]
    pub fn literals(&self) -> &[String] {
        &self.literals
    }

    /// Runs the literal scan over `text` and returns how many distinct literals occur in it.
    /// Exists for the benchmark (see [`Catalogue::literals`]).
    #[doc(hidden)]
    pub fn scan_literals(&self, text: &[u8]) -> usize {
        let mut found = crate::engine::Found::new(self.literals.len());
        self.scanner.scan(text, &mut found);
        // One hit per distinct literal (its first offset).
        found.distinct()
    }

    /// The same catalogue with its rules visited in another order (`order[i]` is the old index
    /// of the new rule `i`). Exists for the determinism test: results must not depend on it.
    #[doc(hidden)]
    pub fn reordered(&self, order: &[usize]) -> Catalogue {
        let mut rules: Vec<Rule> = order.iter().filter_map(|&i| self.rules.get(i).cloned()).collect();
        // Keep any rule the permutation left out, so the test cannot pass by dropping rules.
        for (i, r) in self.rules.iter().enumerate() {
            if !order.contains(&i) {
                rules.push(r.clone());
            }
        }
        let mut cat = Catalogue {
            rules,
            ..self.clone()
        };
        cat.index();
        cat
    }
}

/// Whether a JSON condition value always appears verbatim in the JSON text: no characters
/// that JSON may escape, and long enough to be a useful prefilter.
fn json_hint_literal(v: &str) -> bool {
    v.len() >= 3
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':' | b'@'))
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && !id.starts_with(['.', '-'])
        && !id.ends_with(['.', '-'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_compiles_and_has_a_hash_version() {
        let cat = Catalogue::from_sources(BUILTIN_SOURCES).expect("compiles");
        assert!(cat.version().starts_with("cat-"));
        assert_eq!(cat.version().len(), 4 + 12);
        assert!(!cat.rules().is_empty());
    }

    #[test]
    fn any_change_to_a_rule_changes_the_version() {
        let a = r#"[[rule]]
id = "t.one"
tier = "exact"
code = "rate_limited"
confidence = "high"
kinds = ["stderr"]
contains = ["rate limit"]
"#;
        let b = a.replace("rate limit\"]", "rate-limit\"]");
        let va = Catalogue::from_str(a).expect("a").version().to_owned();
        let vb = Catalogue::from_str(&b).expect("b").version().to_owned();
        assert_ne!(va, vb);
        assert_eq!(va, Catalogue::from_str(a).expect("a again").version());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let bad = r#"[[rule]]
id = "t.one"
tier = "exact"
code = "no_such_code"
confidence = "high"
kinds = ["stderr"]
contains = ["x"]

[[rule]]
id = "t.two"
tier = "exact"
code = "rate_limited"
confidence = "high"
kinds = ["stderr"]
regex = "(unclosed"
timing = ["tomorrow_ish"]

[[rule]]
id = "t.two"
tier = "exact"
code = "rate_limited"
confidence = "high"
kinds = ["stderr"]

[[rule]]
id = "Bad Id"
tier = "exact"
code = "rate_limited"
confidence = "high"
kinds = ["stderr"]
contains = ["y"]
"#;
        let err = Catalogue::from_str(bad).expect_err("invalid");
        let all = err.0.join("\n");
        assert!(all.contains("unknown code `no_such_code`"), "{all}");
        assert!(all.contains("invalid regex"), "{all}");
        assert!(all.contains("unknown timing extractor `tomorrow_ish`"), "{all}");
        assert!(all.contains("duplicate rule id `t.two`"), "{all}");
        assert!(all.contains("at least one match condition"), "{all}");
        assert!(all.contains("rule id `Bad Id`"), "{all}");
    }

    #[test]
    fn a_notice_must_be_a_message_rule_that_names_no_cause_and_has_a_regex() {
        let notice = |code: &str, kinds: &str, regex: &str| {
            format!(
                "[[rule]]\nid = \"t.notice\"\ntier = \"broad\"\ncode = \"{code}\"\nconfidence = \"high\"\nnotice = true\nkinds = {kinds}\ncontains = [\"Model metadata\"]\n{regex}"
            )
        };
        let good = notice(
            "not_provider_error",
            r#"["acp_message"]"#,
            "regex = 'Model metadata'",
        );
        assert!(Catalogue::from_str(&good).expect("a notice").rules()[0].notice);
        for bad in [
            notice("rate_limited", r#"["acp_message"]"#, "regex = 'Model metadata'"),
            notice(
                "not_provider_error",
                r#"["acp_message", "stderr"]"#,
                "regex = 'Model metadata'",
            ),
            notice("not_provider_error", r#"["acp_message"]"#, ""),
        ] {
            let err = Catalogue::from_str(&bad).expect_err("not a notice");
            assert!(
                err.0.join("; ").contains("a notice looks only at `acp_message`"),
                "{bad}"
            );
        }
    }

    #[test]
    fn zero_usage_alone_is_a_match_condition() {
        let rule = "[[rule]]\nid = \"t.zero\"\ntier = \"broad\"\ncode = \"provider_unavailable\"\nconfidence = \"medium\"\nkinds = [\"acp_result\"]\nzero_usage = true\n";
        assert_eq!(
            Catalogue::from_str(rule).expect("compiles").rules()[0].zero_usage,
            Some(true)
        );
    }

    #[test]
    fn unknown_tier_and_unknown_fields_are_rejected() {
        let bad = r#"[[rule]]
id = "t.one"
tier = "fuzzy"
code = "rate_limited"
confidence = "high"
kinds = ["stderr"]
contains = ["x"]
"#;
        assert!(Catalogue::from_str(bad).is_err());
        let bad = bad.replace("fuzzy", "exact").replace("contains", "containz");
        assert!(Catalogue::from_str(&bad).is_err());
    }
}
