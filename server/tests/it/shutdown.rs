//! A graceful stop with live pages open: the real `recourse serve`, a real Server-Sent Events
//! client on `/api/v1/events` (what every open browser tab holds), then SIGTERM. The stop must
//! end the stream and the process within a few seconds; before the fix the stream outlived the
//! signal and the process never exited.

use crate::common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::{Duration, Instant},
};

#[test]
fn sigterm_ends_open_event_streams_and_stops_the_server_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr, _) = common::spawn_serve(common::backend::database(dir.path(), "s.db"), &[], false);
    let token = common::token_for(&addr).unwrap();

    // Two live pages, as browsers open them.
    let streams: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            write!(
                s,
                "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
            )
            .unwrap();
            let mut head = [0u8; 12];
            s.read_exact(&mut head).unwrap();
            assert_eq!(&head, b"HTTP/1.1 200", "the stream is open");
            s
        })
        .collect();

    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (exited, exit) = std::sync::mpsc::channel();
    let mut child = child;
    std::thread::spawn(move || exited.send(child.wait().unwrap()));
    let asked = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let Ok(status) = exit.recv_timeout(Duration::from_secs(15)) else {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        panic!("the server was still running 15 s after SIGTERM with event streams open");
    };
    assert!(status.success(), "exit status after SIGTERM: {status}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "stopping took {:?}",
        asked.elapsed()
    );
    // Each client saw its stream end (EOF), not a hang.
    for mut s in streams {
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("the stream ended cleanly");
    }
}
