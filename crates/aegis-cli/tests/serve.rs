//! A real `aegis serve` on the real model, attacked and stopped the way a hostile page, a slow
//! client and a service manager would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::aegis_command;

/// `aegis serve` on a free port, its model loaded.
pub(crate) struct Served {
    process: Child,
    pub(crate) address: String,
    /// What the server logs after it says where it listens, read as it comes so a busy server
    /// never blocks on a full pipe.
    log: Option<JoinHandle<Vec<String>>>,
}

impl Served {
    fn start(extra: &[&str]) -> Self {
        let mut args = vec!["--no-history"];
        args.extend_from_slice(extra);
        Self::keeping_history(&args)
    }

    /// Recording verdicts (in the fresh database `aegis_command` names), as /feedback needs.
    pub(crate) fn keeping_history(extra: &[&str]) -> Self {
        let mut args = vec!["serve", "--port", "0"];
        args.extend_from_slice(extra);
        let mut process = aegis_command(&args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve");
        let mut log = BufReader::new(process.stderr.take().expect("stderr")).lines();
        let address = log
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("listening on http://").map(str::to_string))
            .expect("the server says where it listens");
        let log = std::thread::spawn(move || log.map_while(Result::ok).collect());
        let served = Self {
            process,
            address,
            log: Some(log),
        };
        while !served.get("/health", "localhost").contains("\"ready\"") {
            std::thread::sleep(Duration::from_millis(200));
        }
        served
    }

    /// Sends a raw request and reads the whole answer (`Connection: close`).
    fn raw(&self, request: &str) -> String {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        answer
    }

    fn get(&self, path: &str, host: &str) -> String {
        self.raw(&format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        ))
    }

    /// Opens a POST of `body` with these extra header lines, sent but not yet answered.
    fn post_open(&self, path: &str, headers: &str, body: &str) -> TcpStream {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n{headers}\r\n{body}",
            body.len()
        )
        .expect("send");
        stream
    }

    pub(crate) fn terminate(&self) {
        let pid = self.process.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success());
    }

    /// Waits for the process to exit, at most `limit`; how long it took.
    fn exits_within(&mut self, limit: Duration) -> Duration {
        let signalled = Instant::now();
        loop {
            if let Some(status) = self.process.try_wait().expect("wait") {
                assert!(status.success(), "{status:?}");
                return signalled.elapsed();
            }
            if signalled.elapsed() > limit {
                let _ = self.process.kill();
                panic!("still running {limit:?} after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the server logged after it said where it listens, once it has exited.
    pub(crate) fn rest_of_log(&mut self) -> String {
        self.log
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default()
            .join("\n")
    }
}

/// A test that fails must not leave its server running (it holds the test's output open).
impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.process.try_wait(), Ok(None)) {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

fn read_all(mut stream: TcpStream) -> String {
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn sigterm_lets_the_request_in_flight_finish() {
    let mut served = Served::start(&[]);
    let body = r#"{"user_id":"u","question":"Selamat pagi, apa kabar?"}"#;
    let stream = served.post_open("/validate", "Host: localhost\r\n", body);
    std::thread::sleep(Duration::from_millis(200));
    served.terminate();
    let answer = read_all(stream);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status_guard\""), "{answer}");
    served.exits_within(Duration::from_secs(5));
    assert!(served.rest_of_log().contains("in-flight requests answered"));
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn sigterm_ends_within_five_seconds_cancelling_what_would_outlast_it() {
    let mut served = Served::start(&[]);
    // A client that never finishes its body, and answers being written: neither may hold the
    // process past the grace.
    let stalled = {
        let mut stream = TcpStream::connect(&served.address).expect("connect");
        write!(
            stream,
            "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: 1000\r\n\r\n{{\"user_id\": \"u\", "
        )
        .expect("send");
        stream
    };
    let answering: Vec<TcpStream> = (0..2)
        .map(|i| {
            let body = format!(
                r#"{{"user_id":"u{i}","answer":true,"messages":[{{"role":"user","content":"Tell me a long story about a lighthouse keeper and the sea, in many chapters."}}]}}"#
            );
            served.post_open("/chat", "Host: localhost\r\n", &body)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    served.terminate();
    let took = served.exits_within(Duration::from_secs(5));
    drop((stalled, answering));
    let log = served.rest_of_log();
    assert!(log.contains("cancelled"), "{took:?}\n{log}");
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_page_on_a_foreign_name_or_origin_is_refused_and_loopback_clients_are_answered() {
    let mut served = Served::start(&["--allowed-host", "guard.internal"]);
    // DNS rebinding: a page on attacker.example whose name now resolves to 127.0.0.1.
    let feedback = r#"{"validator":"toxic","violates":true,"text":"kamu pintar"}"#;
    let rebound = read_all(served.post_open(
        "/feedback",
        "Host: attacker.example\r\nOrigin: http://attacker.example\r\n",
        feedback,
    ));
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    assert!(rebound.contains("host_not_allowed"), "{rebound}");
    let foreign_page = read_all(served.post_open(
        "/feedback",
        "Host: 127.0.0.1\r\nOrigin: https://attacker.example\r\n",
        feedback,
    ));
    assert!(foreign_page.starts_with("HTTP/1.1 403"), "{foreign_page}");
    assert!(
        foreign_page.contains("origin_not_allowed"),
        "{foreign_page}"
    );
    for host in ["localhost", "127.0.0.1", "guard.internal"] {
        let answer = served.get("/validators", host);
        assert!(answer.starts_with("HTTP/1.1 200"), "{host}: {answer}");
    }
    served.terminate();
    served.exits_within(Duration::from_secs(5));
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_conversation_too_long_to_check_is_refused_at_once() {
    let mut served = Served::start(&[]);
    let turns: Vec<String> = (0..200)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            format!(r#"{{"role":"{role}","content":"pesan nomor {i}"}}"#)
        })
        .collect();
    let body = format!(
        r#"{{"user_id":"u","turns":"all","messages":[{}]}}"#,
        turns.join(",")
    );
    let sent = Instant::now();
    let answer = read_all(served.post_open("/validate", "Host: localhost\r\n", &body));
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("too_many_turns"), "{answer}");
    served.terminate();
    served.exits_within(Duration::from_secs(5));
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_blank_token_or_origin_that_is_not_one_is_refused_at_start() {
    let blank = aegis_command(&["serve", "--port", "0", "--no-history", "--token", " "])
        .output()
        .expect("runs");
    assert_eq!(blank.status.code(), Some(2));
    assert!(
        crate::stderr(&blank).contains("blank"),
        "{}",
        crate::stderr(&blank)
    );
    let origin = aegis_command(&[
        "serve",
        "--port",
        "0",
        "--no-history",
        "--cors-origin",
        "localhost:5173",
    ])
    .output()
    .expect("runs");
    assert_eq!(origin.status.code(), Some(2));
    assert!(
        crate::stderr(&origin).contains("not an origin"),
        "{}",
        crate::stderr(&origin)
    );
}

/// The process's resident memory, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

/// CPU time the process has used, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    ticks / 100.0
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn eight_long_answers_at_once_are_bounded_and_stop_when_their_clients_leave() {
    // Answers as long as the server allows: one that went on after its client left would keep a
    // core busy for minutes, far past the bound below.
    let mut served = Served::start(&["--answer-tokens", "2048"]);
    let pid = served.process.id();
    let before = rss_mib(pid);
    let long_turn = "The harbour was quiet that morning and the boats rocked gently. ".repeat(60);
    let clients: Vec<TcpStream> = (0..8)
        .map(|i| {
            let body = serde_json::json!({
                "user_id": format!("heavy-{i}"),
                "answer": true,
                "messages": [
                    {"role": "user", "content": "Tell me about the harbour."},
                    {"role": "assistant", "content": long_turn},
                    {"role": "user", "content": "Now tell me a much longer story about it, in many chapters."}
                ]
            })
            .to_string();
            served.post_open("/chat", "Host: localhost\r\n", &body)
        })
        .collect();
    // Long enough for the checks to end and answers to begin on an idle machine.
    let mut peak = before;
    for _ in 0..80 {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(rss_mib(pid));
    }
    // The clients give up. What the server had begun stops at its next token or prompt chunk,
    // but a batch of checks already running ends first, and under a loaded CI machine that
    // alone can take seconds: the server must be idle within a bound far below what the
    // answers it had begun would take.
    drop(clients);
    let left = Instant::now();
    let settle_within = Duration::from_secs(20);
    let mut busy = 1.0;
    while busy >= 0.1 && left.elapsed() < settle_within {
        let used_before = cpu_seconds(pid);
        std::thread::sleep(Duration::from_secs(1));
        busy = cpu_seconds(pid) - used_before;
    }
    assert!(
        peak - before <= 600.0,
        "resident memory grew {:.0} MiB (from {before:.0} to {peak:.0})",
        peak - before
    );
    assert!(
        busy < 0.1,
        "still {:.0}% of a core busy {:.0} s after the clients left",
        busy * 100.0,
        left.elapsed().as_secs_f64()
    );
    // And the server still answers.
    let health = served.get("/health", "localhost");
    assert!(health.contains("\"ready\""), "{health}");
    served.terminate();
    served.exits_within(Duration::from_secs(5));
}

/// schemathesis (scripts/setup-schemathesis.sh installs it; `AEGIS_SCHEMATHESIS` names another)
/// generates requests from /openapi.json, valid and invalid, and checks every answer against the
/// description: no 5xx, valid bodies accepted, invalid ones refused, responses as described.
/// Answers are kept short (`--answer-tokens 8`) so the run takes well under a minute; it is
/// stopped at five.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn schemathesis_finds_the_description_true_to_the_server() {
    let schemathesis = crate::set_up_tool("AEGIS_SCHEMATHESIS", "scripts/setup-schemathesis.sh");
    let mut served = Served::keeping_history(&["--answer-tokens", "8"]);
    let config = crate::repo_root().join("crates/aegis-cli/tests/fixtures/schemathesis.toml");
    let work = tempfile::tempdir().expect("tempdir");
    let mut run = Command::new(&schemathesis)
        .arg("--no-color")
        .arg("--config-file")
        .arg(&config)
        .args(["run", &format!("http://{}/openapi.json", served.address)])
        .args([
            "--checks",
            "all",
            "--max-examples",
            "40",
            "--request-timeout",
            "90",
        ])
        // Its reports and caches go to a folder of its own.
        .current_dir(work.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("schemathesis runs");
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(run.stdout.take().expect("stdout")));
    let stderr = read_all(Box::new(run.stderr.take().expect("stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = run.kill();
            let _ = run.wait();
            panic!(
                "schemathesis still running after 5 minutes:\n{}",
                stdout.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let report = stdout.join().unwrap_or_default();
    assert!(
        status.success() && report.contains("No issues found"),
        "schemathesis found the description untrue:\n{report}\n{}",
        stderr.join().unwrap_or_default()
    );
    served.terminate();
    served.exits_within(Duration::from_secs(5));
}
