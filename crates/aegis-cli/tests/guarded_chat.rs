//! `aegis serve --upstream` as a prototype uses it: OpenAI's official Python client
//! (scripts/setup-openai-client.sh installs it; `AEGIS_OPENAI_PYTHON` names another python that
//! has it) through the real guard to a real llama.cpp server running the default model. A benign
//! message streams in several chunks and ends normally, in both release modes and whole; an
//! insult in each language ends with `content_filter` and that language's rejection.

use std::process::Command;

use aegis_remote::testing::LlamaServer;

use crate::serve::Served;

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn the_openai_client_streams_through_the_guard_and_is_refused_in_each_language() {
    let python = crate::set_up_tool("AEGIS_OPENAI_PYTHON", "scripts/setup-openai-client.sh");
    let upstream = LlamaServer::start();
    let mut served = Served::keeping_history(&["--upstream", &upstream.url]);
    let script = crate::repo_root().join("crates/aegis-cli/tests/fixtures/openai_guarded_chat.py");
    let run = Command::new(&python)
        .arg(&script)
        .arg(format!("http://{}", served.address))
        .output()
        .expect("python runs");
    let report = String::from_utf8_lossy(&run.stdout);
    if !run.status.success() {
        served.terminate();
        panic!(
            "the openai client found the guard wanting:\n{report}\n{}\nserver log:\n{}\nllama-server log:\n{}",
            String::from_utf8_lossy(&run.stderr),
            served.rest_of_log(),
            upstream.log()
        );
    }
    assert_eq!(report.lines().count(), 5, "{report}");
}
