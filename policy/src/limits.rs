//! Backend-owned limits of the policy contract, as named constants.
//!
//! The server validates against these and the browser validates against the very same values,
//! compiled from the same crate, so the two can never disagree about what is allowed. Changing
//! one of them is a contract change: stored documents and persisted route snapshots are
//! re-validated against them when they are read back.

/// The only policy document version this crate reads and writes.
pub const POLICY_DOCUMENT_VERSION: u64 = 1;

/// Smallest `retry.max_retries` accepted while retry is enabled.
pub const MIN_MAX_RETRIES: u32 = 1;
/// Largest `retry.max_retries` accepted while retry is enabled.
pub const MAX_MAX_RETRIES: u32 = 10;

/// Smallest `retry.initial_interval_seconds` accepted while retry is enabled (1 s).
pub const MIN_INITIAL_INTERVAL_SECONDS: u64 = 1;
/// Largest `retry.initial_interval_seconds` accepted while retry is enabled (1 h).
pub const MAX_INITIAL_INTERVAL_SECONDS: u64 = 3_600;

/// Every computed retry delay is capped here (24 h), whatever the ordinal.
pub const MAX_RETRY_DELAY_SECONDS: u64 = 86_400;

/// Smallest `wait_for_reset.max_wait_seconds` accepted while reset waiting is enabled (1 s).
pub const MIN_MAX_WAIT_SECONDS: u64 = 1;
/// Largest `wait_for_reset.max_wait_seconds` accepted while reset waiting is enabled (7 days).
pub const MAX_MAX_WAIT_SECONDS: u64 = 604_800;

/// A dynamic profile has at least one candidate...
pub const MIN_CANDIDATES: usize = 1;
/// ...and at most this many, which bounds every per-route and per-document loop.
pub const MAX_CANDIDATES: usize = 32;
/// Longest candidate id, in characters.
pub const MAX_CANDIDATE_ID_CHARS: usize = 128;

/// Longest profile name, in characters (after trimming).
pub const MAX_PROFILE_NAME_CHARS: usize = 120;
/// Longest profile description, in characters.
pub const MAX_PROFILE_DESCRIPTION_CHARS: usize = 2_000;
/// Longest safe identifier (a provider or model id), in characters. Identifiers are the
/// characters of [`IDENTIFIER_PATTERN`]: they become circuit keys, so nothing else may reach one.
pub const MAX_IDENTIFIER_CHARS: usize = 128;

/// Longest name of an environment variable the server's configuration may name (an endpoint's
/// key, an agent's passed variables, a channel's secret).
pub const MAX_ENV_NAME_CHARS: usize = 128;
/// The characters a provider or model identifier may hold (a regular expression, published in the
/// OpenAPI document): ASCII letters and digits and `. _ - : / @ +`, starting with a letter or digit.
pub const IDENTIFIER_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$";
/// Text fields (names, labels, titles, references, ids) hold no control characters (Unicode
/// `Cc`: U+0000 to U+001F and U+007F to U+009F, what `char::is_control` finds). As a JSON Schema
/// (ECMA-262) pattern, published in the OpenAPI document on every such field.
pub const TEXT_PATTERN: &str = r"^[^\u0000-\u001F\u007F-\u009F]*$";
/// A required line of text: [`TEXT_PATTERN`], and at least one character that is not white space
/// (Unicode `White_Space`, what `str::trim` removes), so a blank name is refused.
pub const LINE_PATTERN: &str = concat!(
    r"^[^\u0000-\u001F\u007F-\u009F]*",
    r"[^\u0000-\u0020\u007F-\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]",
    r"[^\u0000-\u001F\u007F-\u009F]*$"
);
/// An RFC 3339 instant as the API reads one (`chrono`'s `parse_from_rfc3339`): date, `T` (or `t`
/// or a space), time with optional fraction, and `Z` or an offset. As a JSON Schema pattern, on
/// every request date-time, so a string the format leaves open (an empty one) is excluded too.
pub const RFC3339_PATTERN: &str = concat!(
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]",
    r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?",
    r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
);
/// Longest candidate label shown in the UI, in characters.
pub const MAX_LABEL_CHARS: usize = 120;
/// Most steps in a simulated candidate's script.
pub const MAX_SCRIPT_STEPS: usize = 32;
/// Longest delay of a simulated step (7 days, like the longest reset wait).
pub const MAX_SIMULATED_DELAY_SECONDS: u64 = 604_800;
/// Largest evidence envelope a simulated step may carry, in bytes of its JSON.
pub const MAX_SCRIPT_ENVELOPE_BYTES: usize = 16 * 1024;

/// Longest route title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest caller reference (task id, workflow step, Office assignment), in characters.
pub const MAX_CALLER_REFERENCE_CHARS: usize = 256;
/// Longest caller invocation id, in characters.
pub const MAX_INVOCATION_ID_CHARS: usize = 128;
/// Longest profile or route id a request may name, in characters (ids the server makes are
/// about 30).
pub const MAX_ID_CHARS: usize = 128;

/// Routes a list answers when the request names no `limit`...
pub const DEFAULT_ROUTE_LIST_LIMIT: u32 = 100;
/// ...and the most it may name (at least 1).
pub const MAX_ROUTE_LIST_LIMIT: u32 = 1_000;

/// Largest work a route carries, in bytes of its JSON (prompt, messages and parameters).
pub const MAX_WORK_BYTES: usize = 256 * 1024;
/// Most ACP content blocks in a prompt.
pub const MAX_PROMPT_BLOCKS: usize = 64;
/// Most messages of an HTTP call.
pub const MAX_MESSAGES: usize = 256;
/// Longest working directory path, in characters.
pub const MAX_PATH_CHARS: usize = 4_096;
/// A working directory is an absolute path without NUL characters (a JSON Schema pattern).
pub const PATH_PATTERN: &str = r"^/[^\u0000]*$";

/// Shortest lease an external runner may ask for, in seconds.
pub const MIN_LEASE_SECONDS: u64 = 5;
/// Longest lease an external runner may ask for, in seconds (an hour; heartbeats renew it).
pub const MAX_LEASE_SECONDS: u64 = 3_600;
/// The lease an external runner gets when it names none, in seconds.
pub const DEFAULT_LEASE_SECONDS: u64 = 60;

/// Largest request body the REST API reads, in bytes (an evidence envelope is the largest).
pub const MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;

/// What an agent did, as the route page shows it (`crate::transcript`): most entries kept per
/// attempt...
pub const MAX_TRANSCRIPT_ITEMS: usize = 200;
/// ...most bytes of message and thought text per attempt...
pub const MAX_TRANSCRIPT_TEXT_BYTES: usize = 64 * 1024;
/// ...the longest tool-call id, kind or title, in bytes...
pub const MAX_TOOL_FIELD_BYTES: usize = 256;
/// ...the attempts kept per route (the latest)...
pub const MAX_TRANSCRIPT_ATTEMPTS: usize = 8;
/// ...and the routes a server keeps transcripts for (those updated most recently).
pub const MAX_TRANSCRIPT_ROUTES: usize = 256;

/// New candidates: retry disabled (stored as zeros)...
pub const DEFAULT_RETRY_ENABLED: bool = false;
/// ...reset waiting disabled (stored as zero)...
pub const DEFAULT_WAIT_FOR_RESET_ENABLED: bool = false;
/// ...and skip to the next candidate (the legacy generic `try_next` behaviour, no hidden delay).
pub const DEFAULT_ON_EXHAUSTED: crate::document::OnExhausted = crate::document::OnExhausted::Skip;

/// Values the UI pre-fills when a person switches retry on (a sensible start, not a default
/// of the stored document, which keeps retry off).
pub const SUGGESTED_MAX_RETRIES: u32 = 3;
/// See [`SUGGESTED_MAX_RETRIES`].
pub const SUGGESTED_INITIAL_INTERVAL_SECONDS: u64 = 5;
/// Value the UI pre-fills when a person switches reset waiting on (5 min).
pub const SUGGESTED_MAX_WAIT_SECONDS: u64 = 300;

/// A concrete (single-agent) profile's interactive defaults, when its write leaves the policy
/// out: transient errors retry this many times...
pub const CONCRETE_TRANSIENT_MAX_RETRIES: u32 = 3;
/// ...from this interval (doubling), then stop for the person at hand...
pub const CONCRETE_TRANSIENT_INITIAL_INTERVAL_SECONDS: u64 = 5;
/// ...and hard errors wait for a trusted reset up to an hour, then stop.
pub const CONCRETE_HARD_MAX_WAIT_SECONDS: u64 = 3_600;

/// Legacy `retry_same`: exactly one same-candidate retry...
pub const LEGACY_RETRY_SAME_MAX_RETRIES: u32 = 1;
/// ...after 5 seconds, then `stop`.
pub const LEGACY_RETRY_SAME_INITIAL_INTERVAL_SECONDS: u64 = 5;

// ------------------------------------------------------------------------------------------------
// The gateway: OpenAI- and Anthropic-style endpoints SDKs and agents point at (issue 31)
// ------------------------------------------------------------------------------------------------

/// Largest request body a gateway call (`/v1/chat/completions`, `/v1/messages`) takes, in bytes.
/// Larger than [`MAX_REQUEST_BODY_BYTES`]: an agent's turn carries its system prompt, its tool
/// definitions and the whole conversation (Claude Code's first turn is about 100 KB).
pub const MAX_GATEWAY_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Most messages in a gateway call.
pub const MAX_GATEWAY_MESSAGES: usize = 4_096;
/// Longest a client may ask to be held (`x-recourse-max-wait`, in seconds) while its route waits
/// for a retry, a reset or a circuit: as long as the SDKs' own default timeout (10 minutes).
pub const MAX_GATEWAY_WAIT_SECONDS: u64 = 600;
/// How long a call is held without `x-recourse-max-wait`, in seconds.
pub const DEFAULT_GATEWAY_WAIT_SECONDS: u64 = 60;
/// Longest one gateway call may last, from its request to the end of its answer (a stream
/// included), in seconds; past it the answer ends with the style's error.
pub const MAX_GATEWAY_CALL_SECONDS: u64 = 3_600;
/// Most gateway calls one API token may have open at once (on one server).
pub const MAX_GATEWAY_CALLS_PER_TOKEN: usize = 32;

// ------------------------------------------------------------------------------------------------
// Accounts, roles, API tokens and the audit log (issue 13)
// ------------------------------------------------------------------------------------------------

/// Longest account or role name.
pub const MAX_ACCOUNT_NAME_CHARS: usize = 64;
/// An account or role name: letters, digits and `. _ @ -`, starting with a letter or digit
/// (`auth::check_name`).
pub const ACCOUNT_NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._@-]*$";
/// Shortest password (NIST SP 800-63B asks for at least 8; we ask for a passphrase).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password (argon2 hashes any length; this bounds the work a request can ask for).
pub const MAX_PASSWORD_CHARS: usize = 1024;
/// Longest API token name.
pub const MAX_TOKEN_NAME_CHARS: usize = 64;
/// Longest lifetime of an API token, in days (a token always expires).
pub const MAX_TOKEN_DAYS: u32 = 365;
/// Most profiles one API token may be scoped to.
pub const MAX_TOKEN_PROFILES: usize = 64;
/// Longest an API token's secret may be when presented (longer is refused unread).
pub const MAX_TOKEN_CHARS: usize = 128;
/// Audit log rows one page returns by default, and at most.
pub const DEFAULT_AUDIT_PAGE: u32 = 100;
pub const MAX_AUDIT_PAGE: u32 = 500;

// Notifications (`crate::notify`).
/// Most notification rules one profile keeps.
pub const MAX_NOTIFICATION_RULES: usize = 8;
/// Most channels one rule names.
pub const MAX_RULE_CHANNELS: usize = 8;
/// Notifications one page of the in-app list returns by default, and at most.
pub const DEFAULT_NOTIFICATION_PAGE: u32 = 50;
pub const MAX_NOTIFICATION_PAGE: u32 = 200;
/// Largest notification `seq` (the databases' 64-bit signed integer): the most a `through_seq`
/// may name.
pub const MAX_NOTIFICATION_SEQ: u64 = i64::MAX as u64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_the_spec_numbers() {
        assert_eq!((MIN_MAX_RETRIES, MAX_MAX_RETRIES), (1, 10));
        assert_eq!(
            (MIN_INITIAL_INTERVAL_SECONDS, MAX_INITIAL_INTERVAL_SECONDS),
            (1, 60 * 60)
        );
        assert_eq!(MAX_RETRY_DELAY_SECONDS, 24 * 60 * 60);
        assert_eq!(
            (MIN_MAX_WAIT_SECONDS, MAX_MAX_WAIT_SECONDS),
            (1, 7 * 24 * 60 * 60)
        );
    }

    #[test]
    fn suggested_values_are_inside_the_limits() {
        assert!((MIN_MAX_RETRIES..=MAX_MAX_RETRIES).contains(&SUGGESTED_MAX_RETRIES));
        assert!((MIN_INITIAL_INTERVAL_SECONDS..=MAX_INITIAL_INTERVAL_SECONDS)
            .contains(&SUGGESTED_INITIAL_INTERVAL_SECONDS));
        assert!((MIN_MAX_WAIT_SECONDS..=MAX_MAX_WAIT_SECONDS).contains(&SUGGESTED_MAX_WAIT_SECONDS));
    }
}
