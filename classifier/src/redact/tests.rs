use super::*;

#[test]
fn urls_keep_their_host_and_path_and_lose_their_query() {
    assert_eq!(
        redact("see https://docs.anthropic.com/en/api/rate-limits?ref=abc for more"),
        "see https://docs.anthropic.com/en/api/rate-limits?[redacted] for more"
    );
    assert_eq!(
        redact("https://console.anthropic.com/settings/billing"),
        "https://console.anthropic.com/settings/billing"
    );
    assert_eq!(
        redact("connect http://admin:p@ss!w0rd@10.0.0.12:8080/v1"),
        "connect http://[redacted]@10.0.0.12:8080/v1"
    );
}

#[test]
fn ordinary_error_text_is_kept() {
    for t in [
        "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
        "Rate limit reached for gpt-4o in organization on tokens per min (TPM): Limit 30000, Used 30000, Requested 58487. Please try again in 14.036s.",
        "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel-FreeTier\"}]}]}}",
        "ThrottlingException: Too many tokens, please wait before trying again.",
        "retry-after: 20 x-ratelimit-reset-tokens: 6m0s max_tokens: 8192",
        "The model `claude-3-5-sonnet-20241022` does not exist; try gpt-4o-mini-2024-07-18",
        "Error: connect ECONNREFUSED 127.0.0.1:8080 at 2026-11-30T08:00:00Z",
        "You've hit your limit · resets 7pm (Europe/Istanbul)",
    ] {
        assert_eq!(redact(t), t);
    }
}

#[test]
fn a_credential_context_redacts_whatever_follows() {
    for (text, kept) in [
        (
            "{\"headers\":{\"Authorization\":\"Bearer abc.def\"}}",
            "{\"headers\":{\"Authorization\":\"[redacted]\"}}",
        ),
        ("x-api-key: hello-world", "x-api-key: [redacted]"),
        ("DB_PASSWORD=p@ss,w0rd;x next", "DB_PASSWORD=[redacted] next"),
        ("Cookie: a=b; c=d\nnext line", "Cookie: [redacted]\nnext line"),
        (
            "{\\\"x-api-key\\\":\\\"v\\\\\\\"x\\\"}",
            "{\\\"x-api-key\\\":\\\"[redacted]\\\"}",
        ),
        ("'api_key' => 'abc'", "'api_key' => '[redacted]'"),
        ("Invalid API key: abc", "Invalid API key: [redacted]"),
        ("API key provided: abc.", "API key provided: [redacted]."),
        ("password: \"a b c", "password: \"[redacted]"),
    ] {
        assert_eq!(redact(text), kept, "{text}");
    }
}

#[test]
fn excerpts_are_bounded_and_collapse_whitespace() {
    let long = "word ".repeat(500);
    let e = safe_excerpt(&long);
    assert_eq!(e.chars().count(), MAX_EXCERPT_CHARS);
    assert!(e.ends_with('…'));
    let e = safe_excerpt(&"x".repeat(5000));
    assert!(e.chars().count() <= MAX_EXCERPT_CHARS);
    assert_eq!(safe_excerpt("a\n\n  b\tc"), "a b c");
    assert_eq!(safe_excerpt(""), "");
}

#[test]
fn a_cut_never_splits_a_token() {
    // The key straddles the excerpt's end: it is dropped whole, not shown in part.
    let key = "Zq8Xv2Kp9Lm3Nw7Rt5Yb";
    let text = format!("{} {key}{key} tail", "a".repeat(MAX_EXCERPT_CHARS - 10));
    let e = safe_excerpt(&text);
    assert!(!e.contains("Zq8X"), "{e}");
    assert!(e.ends_with('…'), "{e}");
    // A text of one long word is cut at punctuation, never inside a run.
    let json = format!("{{\"a\":\"{}\",\"b\":\"{key}\"}}", "y".repeat(230));
    let e = safe_excerpt(&json);
    assert!(e.chars().count() <= MAX_EXCERPT_CHARS, "{e}");
    assert!(!e.contains("Zq8X"), "{e}");
}

#[test]
fn a_secret_cut_by_the_window_is_dropped_not_half_kept() {
    let text = format!(
        "{} alice.smith@example.com tail",
        "a ".repeat((REDACT_WINDOW_BYTES - 10) / 2)
    );
    let e = safe_excerpt(&text);
    assert!(!e.contains("alice"), "{e}");
}

#[test]
fn redaction_that_lengthens_the_text_is_cut_again() {
    let text = "key=1 ".repeat(100);
    let e = safe_excerpt(&text);
    assert!(e.chars().count() <= MAX_EXCERPT_CHARS, "{e}");
    assert!(!e.contains("key=1"), "{e}");
}

#[test]
fn an_excerpt_whose_words_fill_the_bound_exactly_is_kept_whole() {
    let full = format!("{} abécdé", vec!["abécd"; 39].join(" "));
    assert_eq!(full.chars().count(), MAX_EXCERPT_CHARS);
    assert_eq!(safe_excerpt(&full), full);
    let e = safe_excerpt(&format!("{full} x"));
    assert!(e.chars().count() <= MAX_EXCERPT_CHARS, "{e}");
    assert!(e.ends_with('…'), "{e}");
}

#[test]
fn identifiers_pass_unless_they_look_secret() {
    for id in [
        "claude-sonnet-4-5",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "gpt-4o-mini-2024-07-18",
        "gemini-2.5-flash-preview-05-20",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "deepseek-v4-pro[1m]",
        "openai",
        "@cf/meta/llama-3-8b-instruct",
    ] {
        assert_eq!(identifier(id), id);
    }
    for secret in [
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx",
        "csk-9x8f7g6h5j4k3l2m1n0b9v8c7x6z5a4s3d2f1g0h",
        "has space",
        "Zq8Xv2Kp9Lm3Nw7Rt5YbHj4",
    ] {
        assert_eq!(identifier(secret), "[redacted]", "{secret}");
    }
}

#[test]
fn redaction_is_total_on_odd_input() {
    for t in [
        "",
        ":",
        "=",
        "a:",
        "key=",
        "\"key\":",
        "\\",
        "-----BEGIN ",
        "?a=",
        "@",
        "%40",
        "\\u0040",
        "é:é=é",
        "://@",
        ":\\/\\/@",
    ] {
        let _ = redact(t);
        let _ = safe_excerpt(t);
    }
}
