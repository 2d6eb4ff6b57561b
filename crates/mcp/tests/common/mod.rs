//! Helpers for tests against the real `@modelcontextprotocol/server-everything`, installed on
//! first use into the test cache (`ta_testkit`).
#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// server-everything's program, installed on first use; `None` (with a banner) only when npm's
/// registry cannot be reached.
pub fn everything(test: &str) -> Option<std::path::PathBuf> {
    ta_testkit::SERVER_EVERYTHING.path(test)
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// server-everything running over HTTP (`sse` or `streamableHttp`) on a free port; killed
/// (whole process group) on drop.
pub struct HttpEverything {
    child: Child,
    pub port: u16,
}

impl HttpEverything {
    /// Starts it and waits until its own endpoint answers. Listening on the port is not enough:
    /// two tests that drew the same free port would find the other's server there (the second
    /// one exits on "address in use"), so a server that exits is started again on another port.
    pub fn start(program: &std::path::Path, mode: &str) -> Self {
        let path = if mode == "sse" { "/sse" } else { "/mcp" };
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(program)
                .arg(mode)
                .env("PORT", port.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("spawn server-everything");
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if answers(port, path) && child.try_wait().ok().flatten().is_none() {
                    return HttpEverything { child, port };
                }
                assert!(Instant::now() < deadline, "server-everything {mode} did not answer on {port}{path}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        panic!("server-everything {mode} exited at start five times");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.wait();
    }
}

/// Whether an HTTP server on `port` serves `path` (any answer but 404).
fn answers(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream, application/json\r\n\r\n");
    let mut status = [0u8; 12];
    stream.write_all(request.as_bytes()).is_ok() && stream.read_exact(&mut status).is_ok() && status.starts_with(b"HTTP/1.1 ") && &status[9..] != b"404"
}

/// SIGKILL to a process group.
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).status();
}

pub fn process_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists() && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}
