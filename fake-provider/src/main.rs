//! `fake-provider`: the scripted LLM provider as a process, for the browser tests and scripts.
//!
//! Usage: `fake-provider --script FILE [--log FILE] [--addr 127.0.0.1:0]`.
//!
//! - `--script FILE`: JSON `{"prefix": [REPLY, ...]}` (see the library's `Reply`), read again
//!   at every request, so a test changes the script by rewriting the file.
//! - `--log FILE`: every request appended as one JSON line (prefix, method, path, API, headers,
//!   body, milliseconds since start, which reply it played).
//! - `--addr`: a loopback address (default `127.0.0.1:0`, a free port).
//!
//! Once it listens it prints one line on stdout, `{"addr": "127.0.0.1:PORT"}`, and serves until
//! it is killed or its stdin closes (so it never outlives the test that started it).

use std::path::PathBuf;

fn fail(why: &str) -> ! {
    eprintln!("fake-provider: {why}");
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (mut script, mut log, mut addr) = (None, None, "127.0.0.1:0".to_owned());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--script" => script = args.next().map(PathBuf::from),
            "--log" => log = args.next().map(PathBuf::from),
            "--addr" => addr = args.next().unwrap_or_else(|| fail("--addr needs a value")),
            other => fail(&format!("unknown argument {other}")),
        }
    }
    let Some(script) = script else {
        fail("--script FILE is required")
    };
    let ip = addr.rsplit_once(':').map_or("", |(ip, _)| ip);
    if !matches!(ip, "127.0.0.1" | "localhost" | "[::1]") {
        fail("only a loopback address is allowed");
    }
    let provider = fake_provider::FakeProvider::start_with_files(&addr, script, log)
        .await
        .unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")));
    println!("{}", serde_json::json!({"addr": provider.addr.to_string()}));
    // Serve until stdin closes (the parent is gone) or a signal ends the process.
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    })
    .await;
}
