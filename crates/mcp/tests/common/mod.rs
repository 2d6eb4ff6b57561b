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
    pub fn start(program: &std::path::Path, mode: &str) -> Self {
        let port = free_port();
        let child = Command::new(program)
            .arg(mode)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn server-everything");
        let deadline = Instant::now() + Duration::from_secs(90);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "server-everything {mode} did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        HttpEverything { child, port }
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

/// SIGKILL to a process group.
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).status();
}

pub fn process_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists() && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}
