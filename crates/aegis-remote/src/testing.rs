//! A real llama.cpp server for other crates' tests (feature `test-support`): started on
//! 127.0.0.1 with the default GGUF and stopped when dropped. `scripts/setup-llama-server.sh`
//! builds the binary; `scripts/test.sh` runs it and passes the path in `AEGIS_LLAMA_SERVER`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The llama-cpp-python release whose vendored llama.cpp the setup script builds (keep in step
/// with `LLAMA_CPP_PYTHON_VERSION` there: it names the cache folder).
const LLAMA_CPP_PYTHON_VERSION: &str = "0.3.36";

/// Requests the server handles at once; each gets `SLOT_CONTEXT` tokens.
const SLOTS: usize = 4;
const SLOT_CONTEXT: usize = 2048;

/// Where `scripts/setup-encoder-gguf.sh` leaves EmbeddingGemma's GGUF, unless
/// `AEGIS_ENCODER_GGUF` names one.
pub fn encoder_gguf() -> PathBuf {
    if let Some(path) = std::env::var_os("AEGIS_ENCODER_GGUF") {
        return PathBuf::from(path);
    }
    aegis_cache()
        .join(format!("encoder-gguf-{LLAMA_CPP_PYTHON_VERSION}"))
        .join("embeddinggemma-300m-f32.gguf")
}

fn aegis_cache() -> PathBuf {
    std::env::var_os("AEGIS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::cache_dir()
                .unwrap_or_else(std::env::temp_dir)
                .join("aegis")
        })
}

/// Where the setup script leaves the binary, unless `AEGIS_LLAMA_SERVER` names one.
pub fn llama_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("AEGIS_LLAMA_SERVER") {
        return PathBuf::from(path);
    }
    aegis_cache()
        .join(format!("llama-server-{LLAMA_CPP_PYTHON_VERSION}"))
        .join("llama-server")
}

/// A running `llama-server` serving the default model; killed on drop.
pub struct LlamaServer {
    pub url: String,
    pub port: u16,
    child: Child,
    log: PathBuf,
}

impl LlamaServer {
    /// Starts the server on a free loopback port and waits until it answers `/health`.
    /// Panics with what to run when the binary or the model is missing.
    pub fn start() -> Self {
        let model = aegis_engine::resolve(&aegis_engine::ModelSpec::Default, &Default::default())
            .expect("the default model; run scripts/setup-model.sh");
        let aegis_engine::WeightFiles::Gguf(gguf) = model.weights else {
            panic!("the default model is a GGUF file")
        };
        let args = [
            "--ctx-size".to_string(),
            (SLOTS * SLOT_CONTEXT).to_string(),
            "--parallel".into(),
            SLOTS.to_string(),
            // As the README's deployment runs it: without it, llama.cpp cannot reuse a shared
            // template opening in Gemma 3's sliding-window layers.
            "--swa-full".into(),
        ];
        Self::start_with(&gguf, &args, free_port())
    }

    /// An embedding server on the project's EmbeddingGemma GGUF
    /// (`scripts/setup-encoder-gguf.sh`, or `AEGIS_ENCODER_GGUF`), as the README's team
    /// deployment runs it; `extra` arguments after (a test's `--pooling cls`, say).
    pub fn embeddings(extra: &[&str]) -> Self {
        Self::embeddings_on_port(extra, free_port())
    }

    /// `embeddings` on a chosen port: a test restarts a stopped server where clients expect it.
    pub fn embeddings_on_port(extra: &[&str], port: u16) -> Self {
        let gguf = encoder_gguf();
        assert!(
            gguf.is_file(),
            "no EmbeddingGemma GGUF at {}: run scripts/setup-encoder-gguf.sh (or set AEGIS_ENCODER_GGUF)",
            gguf.display()
        );
        let mut args: Vec<String> = [
            "--embeddings",
            // Each input must fit one micro-batch: an encoder attends over the whole input.
            "--ubatch-size",
            "2048",
            "--batch-size",
            "2048",
        ]
        .map(String::from)
        .to_vec();
        args.extend(["--ctx-size".into(), (SLOTS * SLOT_CONTEXT).to_string()]);
        args.extend(["--parallel".into(), SLOTS.to_string()]);
        args.extend(extra.iter().map(|a| a.to_string()));
        Self::start_with(&gguf, &args, port)
    }

    fn start_with(model: &std::path::Path, args: &[String], port: u16) -> Self {
        let binary = llama_server_binary();
        assert!(
            binary.is_file(),
            "no llama.cpp server at {}: run scripts/setup-llama-server.sh (or set AEGIS_LLAMA_SERVER)",
            binary.display()
        );
        let log = std::env::temp_dir().join(format!("aegis-llama-server-{port}.log"));
        let log_file = std::fs::File::create(&log).expect("server log file");
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let child = Command::new(&binary)
            .arg("--model")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--threads", &threads.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut server = Self {
            url: format!("http://127.0.0.1:{port}"),
            port,
            child,
            log,
        };
        server.wait_until_ready(port);
        server
    }

    /// The server's own log so far, for a failing test's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_until_ready(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "llama-server exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            if health_is_ok(port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("llama-server was not ready within 120 s:\n{}", self.log());
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One plain HTTP/1.0 request, so the wait needs no async runtime: `/health` answers 503 while
/// the model loads and 200 once it serves.
fn health_is_ok(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b" 200")
}
