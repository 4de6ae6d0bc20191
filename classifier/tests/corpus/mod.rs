//! The redaction corpus: secret shapes an adversary would try, and the places in an evidence
//! envelope where agents and providers put text. Every shape is tried in every position; a
//! leak is any [`WINDOW`]-character stretch of a secret's private part found in what comes
//! out. Shared by `classifier/tests/it/redaction.rs` (the classification) and
//! `server/tests/it/redaction.rs` (the API, the event stream, the log and the database file).
//!
//! The random parts are generated from a fixed seed, so the corpus is the same on every run
//! and holds no real credential, and no string in this file looks like one to a scanner.

#![allow(dead_code)]

use serde_json::{json, Value};

/// A leak is this many consecutive characters of a secret part.
pub(crate) const WINDOW: usize = 8;

pub(crate) struct Secret {
    pub(crate) name: &'static str,
    /// The text as it would appear in evidence.
    pub(crate) text: String,
    /// The private parts: none of their `WINDOW`-character stretches may come out.
    pub(crate) parts: Vec<String>,
}

pub(crate) struct Position {
    pub(crate) name: &'static str,
    /// An envelope with the secret's text placed in this position.
    pub(crate) build: fn(&str) -> Value,
}

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        (0..n)
            .map(|_| a[usize::try_from(self.next() % a.len() as u64).unwrap()] as char)
            .collect()
    }
}

const B62: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &str = "0123456789abcdef";
const UPPER36: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const LOWER36: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const DIGITS: &str = "0123456789";
const PUNCT_PW: &str = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789!#$%&*@^~";

/// Every secret shape of the corpus.
pub(crate) fn secrets() -> Vec<Secret> {
    let mut r = Rng(0x5EED_0F12_C0DE);
    let mut v: Vec<Secret> = Vec::new();
    // `add(name, text, parts)`; most shapes are a prefix and one random part.
    let mut add = |name: &'static str, text: String, parts: Vec<String>| v.push(Secret { name, text, parts });
    macro_rules! one {
        ($name:expr, $fmt:expr, $part:expr) => {{
            let p: String = $part;
            add($name, format!($fmt, p), vec![p]);
        }};
    }
    let uuid = |r: &mut Rng| {
        format!(
            "{}-{}-4{}-a{}-{}",
            r.pick(HEX, 8),
            r.pick(HEX, 4),
            r.pick(HEX, 3),
            r.pick(HEX, 3),
            r.pick(HEX, 12)
        )
    };

    // Known provider formats.
    one!("anthropic-api-key", "sk-ant-api03-{}AA", r.pick(B64URL, 93));
    one!("anthropic-admin-key", "sk-ant-admin01-{}AA", r.pick(B64URL, 93));
    one!("openai-project-key", "sk-proj-{}", r.pick(B64URL, 120));
    one!("openai-service-account-key", "sk-svcacct-{}", r.pick(B64URL, 100));
    {
        let (a, b) = (r.pick(B62, 20), r.pick(B62, 20));
        add("openai-legacy-key", format!("sk-{a}T3BlbkFJ{b}"), vec![a, b]);
    }
    one!("openrouter-key", "sk-or-v1-{}", r.pick(HEX, 64));
    one!("deepseek-key", "sk-{}", r.pick(HEX, 32));
    one!("stripe-live-key", "sk_live_{}", r.pick(B62, 24));
    one!("stripe-restricted-key", "rk_live_{}", r.pick(B62, 24));
    one!("google-api-key", "AIza{}", r.pick(B64URL, 35));
    one!("google-oauth-access-token", "ya29.{}", r.pick(B64URL, 100));
    one!("google-refresh-token", "1//{}", r.pick(B64URL, 60));
    one!("google-oauth-client-secret", "GOCSPX-{}", r.pick(B64URL, 28));
    one!("aws-access-key-id", "AKIA{}", r.pick(UPPER36, 16));
    one!("aws-temporary-key-id", "ASIA{}", r.pick(UPPER36, 16));
    one!(
        "aws-secret-in-json",
        "\"SecretAccessKey\":\"{}\"",
        r.pick(B64, 40)
    );
    one!("aws-secret-env", "AWS_SECRET_ACCESS_KEY={}", r.pick(B64, 40));
    one!(
        "aws-session-token-header",
        "X-Amz-Security-Token: {}",
        r.pick(B64, 180)
    );
    one!("github-classic-token", "ghp_{}", r.pick(B62, 36));
    one!("github-oauth-token", "gho_{}", r.pick(B62, 36));
    {
        let (a, b) = (r.pick(B62, 22), r.pick(B62, 59));
        add(
            "github-fine-grained-token",
            format!("github_pat_{a}_{b}"),
            vec![a, b],
        );
    }
    one!("gitlab-token", "glpat-{}", r.pick(B64URL, 20));
    {
        let (a, b, c) = (r.pick(DIGITS, 12), r.pick(DIGITS, 13), r.pick(B62, 24));
        add("slack-bot-token", format!("xoxb-{a}-{b}-{c}"), vec![a, b, c]);
    }
    {
        let (a, b, c) = (r.pick(UPPER36, 10), r.pick(UPPER36, 10), r.pick(B62, 24));
        add(
            "slack-webhook-url",
            format!("https://hooks.slack.com/services/T{a}/B{b}/{c}"),
            vec![a, b, c],
        );
    }
    {
        let (a, b) = (r.pick(DIGITS, 18), r.pick(B64URL, 68));
        add(
            "discord-webhook-url",
            format!("https://discord.com/api/webhooks/{a}/{b}"),
            vec![a, b],
        );
    }
    {
        let (a, b, c) = (uuid(&mut r), r.pick(HEX, 32), uuid(&mut r));
        add(
            "teams-webhook-url",
            format!("https://acme.webhook.office.com/webhookb2/{a}/IncomingWebhook/{b}/{c}"),
            vec![a, b, c],
        );
    }
    one!(
        "generic-webhook-url",
        "https://ci.example.net/hooks/webhook/{}",
        r.pick(B62, 32)
    );
    one!("groq-key", "gsk_{}", r.pick(B62, 52));
    one!("xai-key", "xai-{}", r.pick(B62, 80));
    one!("perplexity-key", "pplx-{}", r.pick(B62, 48));
    one!("huggingface-token", "hf_{}", r.pick(B62, 34));
    one!("replicate-token", "r8_{}", r.pick(B62, 37));
    one!("npm-token", "npm_{}", r.pick(B62, 36));
    one!("pypi-token", "pypi-{}", r.pick(B64URL, 150));
    one!("cerebras-key", "csk-{}", r.pick(LOWER36, 48));
    one!("fireworks-key", "fw_{}", r.pick(B62, 24));
    {
        let (a, b) = (r.pick(B64URL, 22), r.pick(B64URL, 43));
        add("sendgrid-key", format!("SG.{a}.{b}"), vec![a, b]);
    }
    one!("digitalocean-token", "dop_v1_{}", r.pick(HEX, 64));
    one!("shopify-token", "shpat_{}", r.pick(HEX, 32));
    one!("twilio-api-key", "SK{}", r.pick(HEX, 32));
    one!("mailgun-key", "key-{}", r.pick(HEX, 32));
    {
        let (a, b) = (r.pick(DIGITS, 10), r.pick(B64URL, 35));
        add("telegram-bot-token", format!("{a}:{b}"), vec![a, b]);
    }
    one!("unknown-prefix-key", "zz9-{}", r.pick(B62, 40));
    one!("bare-base62-key", "{}", r.pick(B62, 32));
    one!("bare-hex-key", "{}", r.pick(HEX, 32));
    one!("bare-hex-40", "{}", r.pick(HEX, 40));
    one!("bare-base64-key", "{}", r.pick(B64, 44));
    one!("bare-lowercase-alnum-pat", "{}", r.pick(LOWER36, 52));
    one!("bare-lowercase-letters", "{}", r.pick(LOWER, 32));
    one!("bare-uppercase-alnum", "{}", r.pick(UPPER36, 32));
    {
        let (a, b) = (r.pick(B64URL, 36), r.pick(B64URL, 43));
        let h = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";
        add("jwt", format!("{h}.eyJ{a}.{b}"), vec![a, b]);
    }
    one!(
        "azure-storage-connection-string",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={}==;EndpointSuffix=core.windows.net",
        r.pick(B64, 86)
    );
    one!(
        "azure-sas-url",
        "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&sig={}%3D",
        r.pick(B64, 43)
    );
    one!("azure-sas-signature", "sig={}", r.pick(B64, 43));
    one!(
        "ocp-apim-subscription-key",
        "Ocp-Apim-Subscription-Key: {}",
        r.pick(HEX, 32)
    );

    // Credential contexts: the value goes whatever its shape.
    one!(
        "authorization-bearer-header",
        "Authorization: Bearer {}",
        r.pick(B62, 40)
    );
    one!(
        "authorization-bearer-json",
        "\"Authorization\":\"Bearer {}\"",
        r.pick(B62, 40)
    );
    one!(
        "authorization-bearer-dict",
        "'Authorization': 'Bearer {}'",
        r.pick(B62, 40)
    );
    one!(
        "authorization-basic-header",
        "Authorization: Basic {}=",
        r.pick(B64, 31)
    );
    one!(
        "authorization-token-scheme",
        "Authorization: token {}",
        r.pick(B62, 40)
    );
    one!("bearer-alone", "Bearer {}", r.pick(B64URL, 40));
    one!("x-api-key-header", "x-api-key: {}", r.pick(B62, 40));
    one!(
        "x-api-key-escaped-json",
        "{{\\\"x-api-key\\\":\\\"{}\\\"}}",
        r.pick(B62, 40)
    );
    one!("x-goog-api-key-header", "x-goog-api-key: {}", r.pick(B62, 39));
    {
        let (a, b) = (r.pick(B62, 32), r.pick(B62, 32));
        add(
            "cookie-header",
            format!("Cookie: session={a}; csrftoken={b}"),
            vec![a, b],
        );
    }
    one!(
        "set-cookie-header",
        "Set-Cookie: __Secure-next-auth.session-token={}; Path=/; HttpOnly",
        r.pick(B64URL, 120)
    );
    one!("env-provider-api-key", "OPENAI_API_KEY={}", r.pick(B62, 48));
    one!("env-db-password", "DB_PASSWORD={}", r.pick(PUNCT_PW, 18));
    one!("env-auth-token", "GITHUB_AUTH_TOKEN={}", r.pick(B62, 40));
    one!(
        "env-export-quoted",
        "export ANTHROPIC_API_KEY=\"{}\"",
        r.pick(B62, 48)
    );
    one!("php-array-api-key", "'api_key' => '{}'", r.pick(B62, 32));
    one!(
        "python-dict-api-key",
        "{{'api_key': '{}', 'model': 'gpt-4o'}}",
        r.pick(B62, 32)
    );
    one!("yaml-api-key", "api_key: {}", r.pick(B62, 32));
    one!("invalid-api-key-phrase", "Invalid API key: {}", r.pick(B62, 32));
    one!(
        "api-key-provided-phrase",
        "Incorrect API key provided: {}",
        r.pick(LOWER36, 30)
    );
    add(
        "quoted-password-with-spaces",
        "password=\"tangerine walrus quietly orbits\"".to_owned(),
        vec!["tangerine walrus quietly orbits".to_owned()],
    );
    one!("passphrase-field", "passphrase: {}", r.pick(PUNCT_PW, 20));
    one!("client-secret-form", "client_secret={}", r.pick(B62, 40));
    one!(
        "refresh-token-json",
        "\"refresh_token\":\"{}\"",
        r.pick(B64URL, 60)
    );
    one!("credentials-json", "\"credentials\":\"{}\"", r.pick(B62, 40));
    one!(
        "session-token-json",
        "\"sessionToken\": \"{}\"",
        r.pick(B64URL, 64)
    );
    one!(
        "password-form-body",
        "username=bob&password={}&grant_type=password",
        r.pick(PUNCT_PW, 16)
    );
    one!("signature-field", "\"signature\":\"{}\"", r.pick(B64, 64));

    // Armored private keys, on one line with escaped newlines and over several real lines.
    {
        let body = r.pick(B64, 200);
        add(
            "pem-in-service-account-json",
            format!(
                "\"private_key\":\"-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n\""
            ),
            vec![body],
        );
    }
    {
        let (a, b, c) = (r.pick(B64, 64), r.pick(B64, 64), r.pick(B64, 24));
        add(
            "pem-rsa-multiline",
            format!("-----BEGIN RSA PRIVATE KEY-----\n{a}\n{b}\n{c}\n-----END RSA PRIVATE KEY-----"),
            vec![a, b, c],
        );
    }
    {
        let (a, b) = (r.pick(B64, 70), r.pick(B64, 70));
        add(
            "openssh-private-key",
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{a}\n{b}\n-----END OPENSSH PRIVATE KEY-----"),
            vec![a, b],
        );
    }
    {
        let (a, b) = (r.pick(B64, 64), r.pick(B64, 64));
        add(
            "pgp-private-key-block",
            format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{a}\n{b}\n=Ab3x\n-----END PGP PRIVATE KEY BLOCK-----"),
            vec![a, b],
        );
    }
    {
        let a = r.pick(B64, 100);
        add(
            "ec-private-key-cut",
            format!("-----BEGIN EC PRIVATE KEY-----\n{a}"),
            vec![a],
        );
    }

    // URL credentials and query strings.
    {
        let (u, p) = (r.pick(LOWER, 10), r.pick(B62, 20));
        add(
            "basic-auth-url-host",
            format!("https://{u}:{p}@api.example.com/v1"),
            vec![p],
        );
    }
    one!(
        "basic-auth-url-ip",
        "http://admin:{}@10.0.0.12:8080/v1/chat",
        r.pick(B62, 20)
    );
    one!(
        "basic-auth-url-localhost-punctuation",
        "http://svc:{}@localhost:4000/",
        r.pick(PUNCT_PW, 20)
    );
    one!(
        "postgres-url-password",
        "postgres://app:{}@db.internal:5432/prod",
        r.pick(B62, 24)
    );
    one!("redis-url-password", "redis://:{}@cache:6379/0", r.pick(B62, 24));
    one!(
        "query-token-absolute",
        "https://api.example.com/v1/models?token={}",
        r.pick(B62, 32)
    );
    one!(
        "query-key-relative",
        "/v1beta/models/gemini-pro:generateContent?key={}",
        r.pick(B62, 35)
    );
    one!(
        "query-access-token-wss",
        "wss://realtime.example.com/v1?access_token={}",
        r.pick(B62, 40)
    );
    one!(
        "query-key-escaped-url",
        "https:\\/\\/api.example.com\\/v1?key={}",
        r.pick(B62, 32)
    );
    one!(
        "fragment-access-token",
        "https://app.example.com/cb#access_token={}&token_type=bearer",
        r.pick(B62, 40)
    );

    // Personal and account identifiers.
    {
        let (l, d) = (r.pick(LOWER, 12), r.pick(LOWER, 9));
        add("email-plain", format!("{l}@{d}.com"), vec![l]);
    }
    {
        let l = r.pick(LOWER, 12);
        add("email-percent-encoded", format!("{l}%40example.org"), vec![l]);
    }
    {
        let l = r.pick(LOWER, 12);
        add("email-json-escaped", format!("{l}\\u0040example.org"), vec![l]);
    }
    one!("home-macos", "/Users/{}/project/src", r.pick(LOWER, 10));
    one!("home-linux", "/home/{}/.config/agent", r.pick(LOWER, 10));
    one!(
        "home-windows",
        "C:\\Users\\{}\\AppData\\Roaming",
        r.pick(LOWER, 10)
    );
    one!(
        "home-windows-escaped",
        "C:\\\\Users\\\\{}\\\\AppData",
        r.pick(LOWER, 10)
    );
    one!(
        "aws-account-number",
        "account {} is not authorized",
        r.pick(DIGITS, 12)
    );
    one!(
        "aws-arn",
        "arn:aws:bedrock:us-east-1:{}:inference-profile/x",
        r.pick(DIGITS, 12)
    );
    one!(
        "gcp-project-number",
        "project {} has billing disabled",
        r.pick(DIGITS, 12)
    );
    {
        let p = format!("acme-{}-{}", r.pick(LOWER, 6), r.pick(DIGITS, 6));
        add(
            "gcp-project-path",
            format!("projects/{p}/locations/us-central1"),
            vec![p],
        );
    }
    one!("organization-id-field", "organization_id: {}", r.pick(DIGITS, 10));
    {
        let u = uuid(&mut r);
        add(
            "azure-subscription-path",
            format!("/subscriptions/{u}/resourceGroups/rg"),
            vec![u],
        );
    }
    {
        let (a, b, c) = (r.pick(DIGITS, 4), r.pick(DIGITS, 4), r.pick(DIGITS, 4));
        add(
            "dashed-account-number",
            format!("account {a}-{b}-{c}"),
            vec![format!("{a}-{b}-{c}")],
        );
    }
    one!("openai-organization-id", "org-{}", r.pick(B62, 24));
    one!("request-id", "req_{}", r.pick(B62, 24));
    {
        let u = uuid(&mut r);
        add("uuid", u.clone(), vec![u]);
    }
    one!("account-id-json", "\"accountId\":\"{}\"", r.pick(LOWER36, 20));

    // Found by a probe of the released binary (issue #12): Recourse's own API tokens, and
    // credential words followed by a blank, `is`, ` - ` or a percent-encoded `=` rather than
    // `:` or `=`.
    one!("recourse-api-token", "rct_{}", r.pick(B64URL, 43));
    one!("password-after-blank", "password {}", "Tr0ub4dor&3".to_owned());
    // A value of its own: the leak detector tells secrets apart by their stretches.
    one!("password-is", "password is {}", "C0rrect#h0rse".to_owned());
    one!(
        "client-secret-in-words",
        "client secret {}",
        "fZJZ207qc18Ref".to_owned()
    );
    one!("api-key-in-words", "api key {}", "PTsDSuFEhb".to_owned());
    one!("key-hex-in-words", "key {}", "0e087835b9255858".to_owned());
    one!("token-short-value", "token {}", "Ab3dEf9hIj".to_owned());
    one!("api-key-dash", "api_key - {}", "Vti9n4dte2et".to_owned());
    one!(
        "access-token-percent-encoded",
        "access_token%3D{}",
        r.pick(B62, 20)
    );
    one!("env-name-then-blank", "ANTHROPIC_API_KEY {}", r.pick(B62, 12));
    {
        // A 40-character key wrapped across two lines: the second 27 characters leaked.
        let (a, b) = (r.pick(B62, 13), r.pick(LOWER36, 27));
        add(
            "key-wrapped-across-lines",
            format!("api_key={a}\n{b}"),
            vec![a, b],
        );
        let (a, b) = (r.pick(B62, 13), r.pick(LOWER36, 27));
        add(
            "key-wrapped-onto-indented-line",
            format!("api_key={a}\n  {b}"),
            vec![a, b],
        );
        // A continuation too short to be judged as a token on its own.
        let (a, b) = (r.pick(B62, 13), r.pick(B62, 13));
        add(
            "key-wrapped-short-continuation",
            format!("api_key={a}\n  {b}"),
            vec![a, b],
        );
    }
    // Found by an adversarial probe (session 26): names glued from a credential word, values
    // in lists and braces, command-line users, passwords holding URL delimiters, keys printed
    // in groups of one letter case.
    one!("glued-name-dbpassword", "dbpassword={}", r.pick(PUNCT_PW, 12));
    one!("glued-name-pgpassword-env", "PGPASSWORD={}", r.pick(PUNCT_PW, 12));
    one!("glued-name-authtoken", "authtoken={}", r.pick(B62, 12));
    one!("glued-name-clientsecret", "clientsecret: {}", r.pick(B62, 12));
    one!(
        "go-header-map",
        "map[Content-Type:[application/json] X-Api-Key:[{}]]",
        r.pick(B62, 14)
    );
    one!("json-list-api-key", "\"api_key\":[\"{}\"]", r.pick(B62, 14));
    one!(
        "python-list-password",
        "{{'password': ['{}']}}",
        r.pick(PUNCT_PW, 12)
    );
    one!(
        "curl-user-password",
        "curl -u admin:{} https://api.example.com/v1",
        r.pick(PUNCT_PW, 12)
    );
    one!(
        "odbc-braced-password",
        "Server=db;Uid=sa;Pwd={{{}}};",
        r.pick(PUNCT_PW, 12)
    );
    {
        let (a, b) = (r.pick(B62, 10), r.pick(B62, 6));
        add(
            "redis-url-password-with-hash",
            format!("redis://:{a}#{b}@cache:6379"),
            vec![a],
        );
    }
    {
        let groups: Vec<String> = (0..5).map(|_| r.pick(LOWER36, 10)).collect();
        let key = groups.join("-");
        add("key-in-lower-case-groups", key.clone(), vec![key]);
        let groups: Vec<String> = (0..5).map(|_| r.pick(LOWER36, 8)).collect();
        let key = groups.join("_");
        add("key-in-underscored-groups", key.clone(), vec![key]);
    }
    // Found by an adversarial probe (session 27): short random tokens, passwords on command
    // lines and in config formats, separators and letters outside ASCII, passphrases,
    // folded headers, e-mail addresses and home directories in other spellings, and personal
    // numbers.
    // Drawn by the probe, and missed by the rules before it: a 16-digit hex key, a 16-letter
    // one of lower case whose vowels are frequent enough to pass for a word.
    one!("bare-hex-16", "{}", "266023592ddb08b3".to_owned());
    one!(
        "bare-base64-16",
        "{}",
        format!("{}+{}/{}", r.pick(B64, 6), r.pick(B64, 5), r.pick(B64, 3))
    );
    one!("bare-lowercase-16", "{}", "hepmvspcmfotouic".to_owned());
    one!(
        "mysql-glued-password",
        "mysql -uroot -p{} -h db.internal",
        r.pick(LOWER, 10)
    );
    one!(
        "sshpass-password",
        "sshpass -p {} ssh deploy@host",
        r.pick(LOWER, 10)
    );
    one!(
        "sql-identified-by",
        "CREATE USER 'app'@'%' IDENTIFIED BY '{}';",
        r.pick(LOWER, 10)
    );
    one!(
        "netrc-entry",
        "machine api.example.com login bob password {}",
        r.pick(LOWER, 10)
    );
    one!(
        "oracle-connect-string",
        "sqlplus scott/{}@orcl",
        r.pick(LOWER, 10)
    );
    one!(
        "python-tuple-password",
        "auth=('password', '{}')",
        r.pick(LOWER, 10)
    );
    one!(
        "xml-password-element",
        "<password>{}</password>",
        r.pick(LOWER, 10)
    );
    one!(
        "value-named-by-sibling",
        "{{\"name\": \"DB_PASSWORD\", \"value\": \"{}\"}}",
        r.pick(LOWER, 10)
    );
    one!(
        "html-escaped-json-password",
        "&quot;password&quot;:&quot;{}&quot;",
        r.pick(LOWER, 10)
    );
    one!(
        "long-flag-password",
        "tool --password {} --verbose",
        r.pick(LOWER, 10)
    );
    one!(
        "fullwidth-colon-password",
        "password\u{ff1a}{}",
        r.pick(PUNCT_PW, 12)
    );
    one!(
        "no-break-space-after-name",
        "password\u{a0}{}",
        r.pick(PUNCT_PW, 10)
    );
    one!("cyrillic-letter-in-name", "p\u{430}ssword={}", r.pick(LOWER, 9));
    one!(
        "password-word-in-russian",
        "\u{43f}\u{430}\u{440}\u{43e}\u{43b}\u{44c}: {}",
        r.pick(LOWER, 10)
    );
    {
        let key = r.pick(B62, 40);
        let cut: String = key
            .chars()
            .enumerate()
            .flat_map(|(i, c)| if i % 5 == 4 { vec![c, '\u{200b}'] } else { vec![c] })
            .collect();
        add(
            "zero-width-spaces-in-key",
            format!("sk-ant-api03-{cut}"),
            vec![cut],
        );
    }
    {
        let key = r.pick(B62, 32);
        let wide: String = key
            .chars()
            .map(|c| char::from_u32(c as u32 + 0xfee0).unwrap())
            .collect();
        add("fullwidth-key", wide.clone(), vec![wide]);
    }
    add(
        "passphrase-after-colon",
        "password: purple lantern glacier velvet".to_owned(),
        vec!["purple lantern glacier velvet".to_owned()],
    );
    {
        let (a, b) = (r.pick(B62, 20), r.pick(LOWER, 12));
        add(
            "folded-header-value",
            format!("Authorization: Bearer {a}\n {b}"),
            vec![a, b],
        );
    }
    {
        let l = r.pick(LOWER, 9);
        add("email-apostrophe", format!("{l}o'neil@example.com"), vec![l]);
        let l = r.pick(LOWER, 9);
        add("email-punycode-tld", format!("{l}@example.xn--p1ai"), vec![l]);
        let l = r.pick(LOWER, 9);
        add("email-idn-domain", format!("{l}@b\u{fc}cher.de"), vec![l]);
        let l = r.pick(LOWER, 9);
        add("email-html-entity", format!("{l}&#64;example.com"), vec![l]);
        let l = r.pick(LOWER, 9);
        add(
            "email-double-percent-encoded",
            format!("{l}%2540example.com"),
            vec![l],
        );
    }
    {
        let name = format!("{} {}", r.pick(LOWER, 6), r.pick(LOWER, 7));
        add("home-with-space", format!("/Users/{name}/Documents"), vec![name]);
    }
    one!(
        "home-json-escaped-slashes",
        "\\/home\\/{}\\/repo",
        r.pick(LOWER, 9)
    );
    one!("home-tilde-user", "~{}/projects/app", "margaret".to_owned());
    one!(
        "home-percent-encoded",
        "file%3A%2F%2F%2Fhome%2F{}%2Fsrc",
        r.pick(LOWER, 9)
    );
    {
        let d = r.pick(DIGITS, 7);
        let phone = format!("+1 415 {} {}", &d[..3], &d[3..]);
        add("phone-international", phone.clone(), vec![phone]);
        let d = r.pick(DIGITS, 7);
        let phone = format!("(415) {}-{}", &d[..3], &d[3..]);
        add("phone-area-code", phone.clone(), vec![phone]);
        let ssn = format!(
            "{}-{}-{}",
            r.pick("12345678", 3),
            r.pick(DIGITS, 2),
            r.pick(DIGITS, 4)
        );
        add("us-social-security-number", ssn.clone(), vec![ssn]);
        // A Luhn-valid card number in groups of four, and an IBAN with its check digits.
        let card = "4111 1111 1111 1111".to_owned();
        add("card-number-in-groups", card.clone(), vec![card]);
        let iban = "DE89 3704 0044 0532 0130 00".to_owned();
        add("iban-in-groups", iban.clone(), vec![iban]);
    }
    // JSON written on stderr (issue 28): agents log their requests' headers, config and
    // credential objects as JSON or as Node prints objects. Values of one case and of the
    // length of a word, so only the context that names them can redact them.
    one!(
        "json-header-object-x-api-key",
        "{{\"headers\":{{\"x-api-key\":\"{}\",\"content-type\":\"application/json\"}}}}",
        r.pick(LOWER, 12)
    );
    one!(
        "json-headers-authorization-bearer",
        "{{\"method\":\"POST\",\"headers\":{{\"accept\":\"*/*\",\"Authorization\":\"Bearer {}\"}}}}",
        r.pick(LOWER, 12)
    );
    one!(
        "node-inspect-headers",
        "headers: {{ 'x-api-key': '{}', accept: 'application/json' }}",
        r.pick(LOWER, 12)
    );
    {
        let (id, secret, token) = (r.pick(UPPER36, 16), r.pick(LOWER, 14), r.pick(B64, 120));
        add(
            "json-aws-credentials-object",
            format!("{{\"Credentials\":{{\"AccessKeyId\":\"ASIA{id}\",\"SecretAccessKey\":\"{secret}\",\"SessionToken\":\"{token}\"}}}}"),
            vec![id, secret, token],
        );
    }
    {
        let (key_id, body) = (r.pick(HEX, 40), r.pick(B64, 120));
        add(
            "json-gcp-service-account",
            format!("{{\"type\":\"service_account\",\"private_key_id\":\"{key_id}\",\"private_key\":\"-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n\",\"client_email\":\"ci@acme.iam.gserviceaccount.com\"}}"),
            vec![key_id, body],
        );
    }
    one!(
        "json-azure-client-secret",
        "{{\"clientId\":\"app\",\"clientSecret\":\"{}\",\"tenantId\":\"common\"}}",
        r.pick(LOWER, 12)
    );
    {
        let body = r.pick(B64, 96);
        let dashes = "\\u002d".repeat(5);
        add(
            "pem-u002d-escaped",
            format!("\"{dashes}BEGIN PRIVATE KEY{dashes}\\n{body}\\n{dashes}END PRIVATE KEY{dashes}\\n\""),
            vec![body],
        );
    }
    one!(
        "key-u002d-escaped",
        "\"sk\\u002dant\\u002dapi03\\u002d{}\"",
        r.pick(B64URL, 93)
    );
    one!(
        "json-name-u002d-escaped",
        "{{\"x\\u002dapi\\u002dkey\":\"{}\"}}",
        r.pick(LOWER, 12)
    );
    one!(
        "json-name-unicode-escaped",
        "{{\"\\u0070\\u0061\\u0073\\u0073\\u0077\\u006f\\u0072\\u0064\":\"{}\"}}",
        r.pick(LOWER, 12)
    );
    one!(
        "json-url-escaped-slashes-query-token",
        "{{\"url\":\"https:\\/\\/gw.example.com\\/v1beta\\/models\\/m:streamGenerateContent?alt=sse&key={}\"}}",
        r.pick(LOWER, 12)
    );
    one!(
        "json-header-pairs",
        "{{\"headers\":[[\"accept\",\"*/*\"],[\"x-api-key\",\"{}\"]]}}",
        r.pick(LOWER, 12)
    );
    one!(
        "json-header-name-value-entry",
        "{{\"header\":\"Authorization\",\"value\":\"{}\"}}",
        r.pick(LOWER, 12)
    );
    v
}

/// `n` characters of a rate-limit notice and ordinary words, ending in a space.
fn prose(n: usize) -> String {
    let mut t = String::from("Error: 429 rate limit exceeded, the upstream provider rejected the request ");
    while t.len() < n {
        t.push_str("while the agent was working on the task ");
    }
    t.truncate(n - 1);
    let t = t.trim_end().to_owned();
    format!("{t}{} ", ".".repeat(n - 1 - t.len()))
}

/// Every evidence position of the corpus: where agents and providers put text.
pub(crate) fn positions() -> Vec<Position> {
    fn http(status: u16, body: Value) -> Value {
        json!({"phase": "prompt", "items": [{"kind": "http", "status": status, "body": body}]})
    }
    vec![
        Position {
            name: "http-body-text",
            build: |s| http(401, json!(format!("Invalid credentials: {s}"))),
        },
        Position {
            name: "http-body-json-message",
            build: |s| {
                let body = json!({"error": {"message": format!("Incorrect API key provided: {s}"), "type": "invalid_request_error"}});
                http(401, json!(body.to_string()))
            },
        },
        Position {
            name: "http-body-json-value",
            build: |s| {
                http(
                    401,
                    json!({"type": "error", "error": {"type": "authentication_error", "message": format!("rejected {s}")}}),
                )
            },
        },
        Position {
            name: "http-body-echoed-headers",
            build: |s| {
                let body = json!({"error": {"type": "permission_error", "message": "denied"}, "request": {"headers": {"Authorization": format!("Bearer {s}"), "x-api-key": s}}});
                http(403, json!(body.to_string()))
            },
        },
        Position {
            name: "http-body-escaped-json",
            build: |s| {
                let inner = json!({"error": {"message": format!("bad key {s}"), "code": 401}}).to_string();
                http(
                    401,
                    json!(json!({"error": {"message": inner, "code": 401}}).to_string()),
                )
            },
        },
        Position {
            name: "http-headers",
            build: |s| {
                json!({"items": [{"kind": "http", "status": 401,
                "headers": {"www-authenticate": format!("Bearer {s}"), "x-request-id": s},
                "body": "unauthorized"}]})
            },
        },
        Position {
            name: "stderr-line",
            build: |s| json!({"items": [{"kind": "stderr", "lines": [format!("Error: request failed with {s}")]}]}),
        },
        Position {
            // The excerpt's cut (240 characters) falls inside the secret: what the head shows
            // of it must be redacted, though the rest that makes it a secret is past the cut.
            name: "stderr-across-the-cut",
            build: |s| json!({"items": [{"kind": "stderr", "lines": [format!("{}{s} and more", prose(205))]}]}),
        },
        Position {
            name: "stderr-across-the-cut-late",
            build: |s| json!({"items": [{"kind": "stderr", "lines": [format!("{}{s} and more", prose(226))]}]}),
        },
        Position {
            name: "stderr-continuation-line",
            build: |s| json!({"items": [{"kind": "stderr", "lines": ["API Error: 401 authentication failed", format!("  credential: {s}")]}]}),
        },
        Position {
            name: "stderr-own-lines",
            build: |s| {
                let mut lines = vec!["something odd happened".to_owned()];
                lines.extend(s.lines().map(str::to_owned));
                json!({"items": [{"kind": "stderr", "lines": lines}]})
            },
        },
        Position {
            name: "stderr-pretty-json",
            build: |s| {
                let value = json!(format!("key {s} rejected")).to_string();
                json!({"items": [{"kind": "stderr", "lines": ["[API Error: {", "  \"error\": {", format!("    \"message\": {value}"), "  }", "}]"]}]})
            },
        },
        Position {
            // What the ACP adapters print for a failed request: Node's inspect of the error,
            // an open brace whose lines continue the entry, the evidence on one of them.
            name: "stderr-node-inspect-block",
            build: |s| {
                let mut lines = vec![
                    "Error handling request {".to_owned(),
                    "  jsonrpc: '2.0',".to_owned(),
                ];
                let mut own = s.lines();
                lines.push(format!("  error: {}", own.next().unwrap_or_default()));
                lines.extend(own.map(|l| format!("    {l}")));
                lines.push("}".to_owned());
                json!({"items": [{"kind": "stderr", "lines": lines}]})
            },
        },
        Position {
            name: "stderr-with-exit",
            build: |s| json!({"items": [{"kind": "stderr", "lines": [format!("fatal: {s}")]}, {"kind": "process_exit", "code": 1, "signal": null}]}),
        },
        Position {
            name: "acp-error-message",
            build: |s| json!({"items": [{"kind": "acp_error", "code": -32603, "message": format!("Internal error: {s}")}]}),
        },
        Position {
            name: "acp-error-data-details",
            build: |s| {
                let details = format!(
                    "API Error: 401 {}",
                    json!({"error": {"message": format!("Invalid bearer token {s}")}})
                );
                json!({"items": [{"kind": "acp_error", "code": -32603, "message": "Internal error", "data": {"details": details}}]})
            },
        },
        Position {
            name: "acp-error-data-object",
            build: |s| json!({"items": [{"kind": "acp_error", "code": -32603, "message": "Internal error", "data": {"headers": {"x-api-key": s}, "status": 401}}]}),
        },
        Position {
            // Values a credential names without being their key: a header pair in a list, a
            // name/value entry (the text drops brackets and keys).
            name: "acp-error-data-named-values",
            build: |s| {
                json!({"items": [{"kind": "acp_error", "code": -32603, "message": "Internal error", "data": {
                    "headers": [["accept", "*/*"], ["x-api-key", s]],
                    "params": [{"name": "Authorization", "value": s}]}}]})
            },
        },
        Position {
            name: "acp-update-text",
            build: |s| {
                json!({"items": [{"kind": "acp_updates", "updates": [
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": format!("API Error: 401 token {s}")}}],
                "prompt_result": {"stopReason": "end_turn"}}]})
            },
        },
        Position {
            name: "acp-update-split-chunks",
            build: |s| {
                let mid = s.char_indices().nth(s.chars().count() / 2).map_or(0, |(i, _)| i);
                json!({"items": [{"kind": "acp_updates", "updates": [
                    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": format!("Error: {}", &s[..mid])}},
                    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": &s[mid..]}}],
                    "prompt_result": {"stopReason": "end_turn"}}]})
            },
        },
        Position {
            name: "acp-prompt-error",
            build: |s| {
                json!({"items": [{"kind": "acp_updates", "updates": [],
                "prompt_error": {"code": -32603, "message": format!("Internal error: {s}")}}]})
            },
        },
        Position {
            name: "provider-id",
            build: |s| json!({"provider_id": s, "items": [{"kind": "http", "status": 529, "body": "overloaded"}]}),
        },
        Position {
            name: "model-id",
            build: |s| json!({"model_id": s, "items": [{"kind": "http", "status": 529, "body": "overloaded"}]}),
        },
    ]
}

/// Every [`WINDOW`]-character stretch of an output, looked up at once: a stretch of a secret
/// occurs in the output exactly when it is one of these (a UTF-8 string can only match at a
/// character boundary). One pass over the output, where `str::contains` per stretch would scan
/// it once for every stretch of every secret (on `recourse classify`'s whole output, a minute).
pub(crate) struct Stretches<'a> {
    out: &'a str,
    windows: std::collections::HashSet<&'a str>,
}

impl<'a> Stretches<'a> {
    pub(crate) fn of(out: &'a str) -> Self {
        let starts: Vec<usize> = out.char_indices().map(|(i, _)| i).chain([out.len()]).collect();
        let windows = starts
            .windows(WINDOW + 1)
            .map(|w| &out[w[0]..w[WINDOW]])
            .collect();
        Self { out, windows }
    }
}

/// The private stretches of `secret` found in `out`, if any.
pub(crate) fn leaks(secret: &Secret, out: &str) -> Vec<String> {
    leaks_in(secret, &Stretches::of(out))
}

/// [`leaks`], in an output's stretches built once.
pub(crate) fn leaks_in(secret: &Secret, out: &Stretches<'_>) -> Vec<String> {
    let mut found = Vec::new();
    for part in &secret.parts {
        let chars: Vec<char> = part.chars().collect();
        if chars.len() < WINDOW {
            if out.out.contains(part.as_str()) {
                found.push(part.clone());
            }
            continue;
        }
        for w in chars.windows(WINDOW) {
            let w: String = w.iter().collect();
            if out.windows.contains(w.as_str()) {
                found.push(w);
                break;
            }
        }
    }
    found
}
