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

#[test]
fn a_credential_word_then_a_blank_redacts_a_secret_looking_value() {
    for (text, kept) in [
        ("password Tr0ub4dor&3", "password [redacted]"),
        ("password is Tr0ub4dor&3", "password is [redacted]"),
        ("client secret fZJZ207qc18Ref", "client secret [redacted]"),
        ("api key PTsDSuFEhb", "api key [redacted]"),
        ("key 0e087835b9255858", "key [redacted]"),
        ("token Ab3dEf9hIj", "token [redacted]"),
        ("api_key - Vti9n4dte2et", "api_key - [redacted]"),
        (
            "ANTHROPIC_API_KEY xAvgyysewbKB rejected",
            "ANTHROPIC_API_KEY [redacted] rejected",
        ),
        (
            "body access_token%3DTr0ub4dor&next=1",
            "body access_token%3D[redacted]&next=1",
        ),
        ("password%3A%20Tr0ub4dor", "password%3A%20[redacted]"),
        (
            "{\"message\":\"rejected password Tr0ub4dor&3\",\"type\":\"x\"}",
            "{\"message\":\"rejected password [redacted]\",\"type\":\"x\"}",
        ),
    ] {
        assert_eq!(redact(text), kept, "{text}");
    }
}

#[test]
fn credential_words_in_prose_keep_their_words() {
    for t in [
        "Invalid API key provided",
        "token limit exceeded",
        "password reset required",
        "the key is missing",
        "the API key is invalid or expired",
        "max token 128000 exceeded",
        "the token wasn't accepted and the key doesn't exist",
        "Get an API key https://console.anthropic.com/settings/keys",
        "set the api key /login first",
        "the monkey Tr0ub4dor&3 ran",
        "Your credit balance is too low to access the Anthropic API key settings",
        "prompt is too long: 213462 tokens > 200000 maximum",
    ] {
        assert_eq!(redact(t), t);
    }
}

#[test]
fn a_key_wrapped_onto_the_next_line_goes_whole() {
    // Stderr lines of one entry are joined with `\n`; a terminal wraps a long key.
    for (text, shown) in [
        ("Error: api_key=Ab3dEf9hIjKlM\nnOpQr5tUvWxYz rejected", "rejected"),
        ("Error: api_key=Ab3dEf9hIjKlM\n  nOpQr5tUvWxYz", "Error:"),
        ("Error: password: Tr0ub4dor&3\n  nOpQr5tUvWxYz", "password:"),
        ("Error: password Tr0ub4dor&3\n  nOpQr5tUvWxYz", "password"),
    ] {
        let e = safe_excerpt(text);
        assert!(
            !e.contains("nOpQr5") && !e.contains("Ab3dEf") && !e.contains("Tr0ub"),
            "{e}"
        );
        assert!(e.contains(shown), "{e}");
    }
    // The next line is prose: it stays.
    assert_eq!(
        safe_excerpt("password: Tr0ub4dor&3\nretrying now"),
        "password: [redacted] retrying now"
    );
}

#[test]
fn short_random_tokens_go_and_words_of_their_length_stay() {
    for token in [
        "266023592ddb08b3",
        "q8Zk+XyW/Ab3Cd9e",
        "BUOBk6T-KNsXTNvf",
        "hepmvspcmfotouic",
        "849MbeikcebHoybR",
    ] {
        assert_eq!(
            redact(&format!("rejected {token} here")),
            "rejected [redacted] here",
            "{token}"
        );
    }
    for word in [
        "generativelanguage",
        "cloudresourcemanager",
        "internationalization",
        "/opt/homebrew/lib/node_modules/npm/bin/npm-cli.js",
        "/usr/local/lib/python3.12/site-packages/anthropic/_base_client.py",
        "aaaaaaaaaaaaaaaaaaaa",
        "GenerateRequestsPerDayPerProjectPerModel",
    ] {
        let t = format!("failed at {word} now");
        assert_eq!(redact(&t), t, "{word}");
    }
}

#[test]
fn passwords_on_command_lines_and_in_config_formats_go() {
    for (text, kept) in [
        (
            "mysql -uroot -psecretword -h db",
            "mysql -uroot -p[redacted] -h db",
        ),
        (
            "mysql -u root -p'secret word' db",
            "mysql -u root -p'[redacted]' db",
        ),
        ("sshpass -p secretword ssh host", "sshpass -p [redacted] ssh host"),
        (
            "redis-cli -h cache -a secretword ping",
            "redis-cli -h cache -a [redacted] ping",
        ),
        ("7z x a.7z -psecretword", "7z x a.7z -p[redacted]"),
        (
            "smbclient //srv/s -U admin%secretword",
            "smbclient //srv/s -U admin%[redacted]",
        ),
        (
            "htpasswd -bc .htpasswd admin secretword",
            "htpasswd -bc .htpasswd admin [redacted]",
        ),
        (
            "tool --password secretword --verbose",
            "tool --password [redacted] --verbose",
        ),
        (
            "CREATE USER 'a'@'%' IDENTIFIED BY 'secretword';",
            "CREATE USER 'a'@'%' IDENTIFIED BY '[redacted]';",
        ),
        (
            "ALTER ROLE app WITH PASSWORD 'secretword'",
            "ALTER ROLE app WITH PASSWORD '[redacted]'",
        ),
        (
            "machine h.example.com login bob password secretword",
            "machine h.example.com login bob password [redacted]",
        ),
        ("sqlplus scott/secretword@orcl", "sqlplus scott/[redacted]@orcl"),
        (
            "login('password', 'secretword')",
            "login('password', '[redacted]')",
        ),
        ("auth=('bob', 'secretword')", "auth=([redacted])"),
        (
            "<Password>secretword</Password>",
            "<Password>[redacted]</Password>",
        ),
        (
            "{\"name\": \"DB_PASSWORD\", \"value\": \"secretword\"}",
            "{\"name\": \"DB_PASSWORD\", \"value\": \"[redacted]\"}",
        ),
        (
            "&quot;password&quot;:&quot;secretword&quot;",
            "&quot;password&quot;:&quot;[redacted]&quot;",
        ),
        (
            "%22password%22%3A%22secretword%22",
            "%22password%22%3A%22[redacted]%22",
        ),
        ("key: 4f9k 2m8x q7v3 p0za rejected", "key: [redacted] rejected"),
    ] {
        assert_eq!(redact(text), kept, "{text}");
    }
    // Flags of other commands, and placeholders, stay.
    for t in [
        "mkdir -p /var/lib/app && cargo test -p classifier",
        "ssh -p 2222 host",
        "Usage: tool --api-key <KEY> --model <MODEL>",
        "actions/checkout@v4 and @anthropic-ai/claude-code@1.0.3",
    ] {
        assert_eq!(redact(t), t);
    }
}

#[test]
fn a_passphrase_after_a_separator_goes_to_the_end_of_its_clause() {
    for (text, kept) in [
        ("password: correct horse battery staple", "password: [redacted]"),
        (
            "password: correct horse, user: bob",
            "password: [redacted], user: bob",
        ),
        (
            "{\"msg\":\"password: correct horse\",\"x\":1}",
            "{\"msg\":\"password: [redacted]\",\"x\":1}",
        ),
        (
            "db:\n  password: correct horse\n  host: db",
            "db:\n  password: [redacted]\n  host: db",
        ),
        // A secret-looking first word is the whole value; a shell word after `=` too.
        ("password: Tr0ub4dor&3 rejected", "password: [redacted] rejected"),
        (
            "DB_PASSWORD=p@ss,w0rd psql -h db",
            "DB_PASSWORD=[redacted] psql -h db",
        ),
    ] {
        assert_eq!(redact(text), kept, "{text}");
    }
}

#[test]
fn characters_outside_ascii_do_not_hide_a_secret() {
    let key = "Zq8Xv2Kp9Lm3Nw7Rt5YbHj4Qe6";
    let zw: String = key.chars().flat_map(|c| ['\u{200b}', c]).skip(1).collect();
    let wide: String = key
        .chars()
        .map(|c| char::from_u32(c as u32 + 0xfee0).unwrap())
        .collect();
    for (text, kept) in [
        (
            "password\u{ff1a}hunter2x".to_owned(),
            "password\u{ff1a}[redacted]",
        ),
        ("password:\u{a0}hunter2x".to_owned(), "password:\u{a0}[redacted]"),
        ("password\u{a0}Tr0ub4dor&3".to_owned(), "password\u{a0}[redacted]"),
        ("p\u{430}ssword=hunter".to_owned(), "p\u{430}ssword=[redacted]"),
        (
            "\u{43f}\u{430}\u{440}\u{43e}\u{43b}\u{44c}: hunter".to_owned(),
            "\u{43f}\u{430}\u{440}\u{43e}\u{43b}\u{44c}: [redacted]",
        ),
        (
            "contrase\u{f1}a: hunter".to_owned(),
            "contrase\u{f1}a: [redacted]",
        ),
        (format!("key {zw} end"), "key [redacted] end"),
        (format!("got {wide} end"), "got [redacted] end"),
        ("mail alice@b\u{fc}cher.de now".to_owned(), "mail [redacted] now"),
    ] {
        assert_eq!(redact(&text), kept, "{text}");
    }
    // Other non-ASCII text is read as it is.
    for t in [
        "Claude Code · ✕ API Error",
        "日本語のエラー: 接続できません",
        "Ошибка: превышен лимит запросов",
    ] {
        assert_eq!(redact(t), t);
    }
}

#[test]
fn headers_folded_onto_the_next_line_go_whole() {
    assert_eq!(
        redact("Authorization: Bearer Ab3dEf9hIjKlM\n nopqrstuvwx\nnext"),
        "Authorization: [redacted]\nnext"
    );
    assert_eq!(
        redact("x-api-key: 3dkyskcw9hlfkja95co7\n\tjbkixvomgmqz"),
        "x-api-key: [redacted]"
    );
}

#[test]
fn e_mail_addresses_in_other_spellings_go() {
    for t in [
        "o'neil@example.com",
        "alice@example.xn--p1ai",
        "jos\u{e9}@example.com",
        "alice&#64;example.com",
        "alice&#x40;example.com",
        "alice&commat;example.com",
        "alice%2540example.com",
        "\"alice smith\"@example.com",
    ] {
        let r = redact(&format!("to {t} now"));
        assert_eq!(r, "to [redacted] now", "{t}");
    }
}

#[test]
fn home_directories_in_other_spellings_lose_their_user() {
    for (text, kept) in [
        ("/Users/Alice Smith/Documents/x", "/Users/[redacted]/Documents/x"),
        (
            "at /home/alice and /home/bob",
            "at /home/[redacted] and /home/[redacted]",
        ),
        ("\\/home\\/alice\\/repo", "\\/home\\/[redacted]\\/repo"),
        ("cd ~alice/projects", "cd ~[redacted]/projects"),
        (
            "file%3A%2F%2F%2Fhome%2Falice%2Fsrc",
            "file%3A%2F%2F%2Fhome%2F[redacted]%2Fsrc",
        ),
    ] {
        assert_eq!(redact(text), kept, "{text}");
    }
    for t in ["cd ~/projects", "about ~100ms"] {
        assert_eq!(redact(t), t);
    }
}

#[test]
fn personal_numbers_go_and_other_numbers_stay() {
    for (text, kept) in [
        ("call +1 415 555 0132 now", "call [redacted] now"),
        ("tel (415) 555-0132", "tel [redacted]"),
        ("tel: 415.555.0132", "tel: [redacted]"),
        ("card 4111 1111 1111 1111 declined", "card [redacted] declined"),
        ("ssn 123-45-6789", "ssn [redacted]"),
        ("IBAN DE89 3704 0044 0532 0130 00 ok", "IBAN [redacted] ok"),
        ("IBAN GB82WEST12345698765432", "IBAN [redacted]"),
    ] {
        assert_eq!(redact(text), kept, "{text}");
    }
    for t in [
        "at 2026-11-30 08:00:00Z, version 1.2.3, 10.0.0.12:8080",
        "retry on 429 500 503 after 14.036s",
        "Limit 30000, Used 30000, Requested 58487",
        "node v20.11.1 build 20250929.1 pid 12345",
    ] {
        assert_eq!(redact(t), t);
    }
}

#[test]
fn an_identifier_with_a_password_after_a_colon_goes() {
    for id in ["bob:correcthorse", "admin:hunter2hunter"] {
        assert_eq!(identifier(id), "[redacted]", "{id}");
    }
    for id in [
        "llama3:8b",
        "deepseek-r1:latest",
        "ollama:qwen2",
        "openai:gpt-4o",
        "openrouter:meta-llama/llama-3",
        "openai/gpt-4o:free",
    ] {
        assert_eq!(identifier(id), id);
    }
}

#[test]
fn a_secret_split_over_two_stderr_lines_is_known_from_the_line_above() {
    // The excerpt shows the second line; the first holds the name or the first half.
    assert_eq!(
        safe_excerpt_after("Error: password=", "hunter2x rejected"),
        "[redacted] rejected"
    );
    assert_eq!(
        safe_excerpt_after("export X_API_KEY=4pbyr7rtfo60mavk4cu8", "tbgiuedqfwrc end"),
        "[redacted] end"
    );
    assert_eq!(safe_excerpt_after("something odd", "all is well"), "all is well");
}
