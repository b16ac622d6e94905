//! OpenAI's `POST /v1/chat/completions` on an upstream server, in one piece or as server-sent
//! events. The request body is the client's, passed through; only `stream` is set here.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// How long connecting may take; answering may take as long as generation does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest error text kept from an upstream's refusal: enough to say why, not a page of HTML.
const ERROR_TEXT_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{0:?} is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("the upstream at {url} cannot be reached: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the upstream answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error("the upstream's answer is not a chat completion: {0}")]
    Malformed(String),
}

/// An OpenAI-compatible chat server. Its key goes in `Authorization` and nowhere else: not in
/// `Debug`, errors or logs.
#[derive(Clone)]
pub struct Upstream {
    endpoint: String,
    key: Option<String>,
    http: reqwest::Client,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("endpoint", &self.endpoint)
            .field("key", &self.key.as_ref().map(|_| "(set)"))
            .finish()
    }
}

impl Upstream {
    /// `url` is the server's root (`http://127.0.0.1:8080`) or its OpenAI base
    /// (`https://api.example.com/v1`), as an OpenAI client's `base_url` is written.
    pub fn new(url: &str, key: Option<String>) -> Result<Self, UpstreamError> {
        let root = url.trim().trim_end_matches('/');
        let scheme_ok = root.starts_with("http://") || root.starts_with("https://");
        if !scheme_ok || reqwest::Url::parse(root).is_err() {
            return Err(UpstreamError::BadUrl(url.to_string()));
        }
        let endpoint = if root.ends_with("/v1") {
            format!("{root}/chat/completions")
        } else {
            format!("{root}/v1/chat/completions")
        };
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| UpstreamError::Unreachable {
                url: endpoint.clone(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            endpoint,
            key: key.filter(|k| !k.trim().is_empty()),
            http,
        })
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The whole answer at once (`stream: false`).
    pub async fn complete(&self, request: &Value) -> Result<Value, UpstreamError> {
        let response = self.send(request, false).await?;
        let text = response.text().await.map_err(|e| self.unreachable(e))?;
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| UpstreamError::Malformed(format!("not JSON ({e})")))?;
        if answer_content(&answer).is_none() {
            return Err(UpstreamError::Malformed(
                "no choices[0].message.content".into(),
            ));
        }
        Ok(answer)
    }

    /// The answer as the upstream writes it (`stream: true`). Dropping the [`Deltas`] closes the
    /// connection, which is how a server is told to stop generating.
    pub async fn stream(&self, request: &Value) -> Result<Deltas, UpstreamError> {
        let response = self.send(request, true).await?;
        Ok(Deltas {
            response,
            events: EventReader::default(),
            finished: false,
            url: self.endpoint.clone(),
        })
    }

    async fn send(
        &self,
        request: &Value,
        stream: bool,
    ) -> Result<reqwest::Response, UpstreamError> {
        let mut body = request.clone();
        body["stream"] = Value::Bool(stream);
        let mut post = self.http.post(&self.endpoint).json(&body);
        if let Some(key) = &self.key {
            post = post.bearer_auth(key);
        }
        let response = post.send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        Err(UpstreamError::Refused {
            status: status.as_u16(),
            message: refusal_message(&text),
        })
    }

    fn unreachable(&self, error: reqwest::Error) -> UpstreamError {
        UpstreamError::Unreachable {
            url: self.endpoint.clone(),
            // Without the URL, which the message already names.
            reason: error.without_url().to_string(),
        }
    }
}

/// `choices[0].message.content` of a whole answer.
pub(crate) fn answer_content(answer: &Value) -> Option<&str> {
    answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
}

/// What an upstream's error body says: OpenAI's `error.message` when it has one, else the start
/// of the text.
fn refusal_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
        })
        .and_then(Value::as_str)
        .unwrap_or(body);
    let message: String = message.trim().chars().take(ERROR_TEXT_CHARS).collect();
    if message.is_empty() {
        "(no reason given)".into()
    } else {
        message
    }
}

/// A streamed answer's chunks, in order.
pub struct Deltas {
    response: reqwest::Response,
    events: EventReader,
    finished: bool,
    url: String,
}

impl fmt::Debug for Deltas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deltas").field("url", &self.url).finish()
    }
}

impl Deltas {
    /// The next chunk (`chat.completion.chunk`), or `None` after `data: [DONE]` or the end of
    /// the body.
    pub async fn next(&mut self) -> Option<Result<Value, UpstreamError>> {
        loop {
            match self.events.next_event() {
                Some(Event::Done) => {
                    self.finished = true;
                    return None;
                }
                Some(Event::Data(data)) => return Some(chunk(&data)),
                None if self.finished => return None,
                None => {}
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.events.push(&bytes),
                Ok(None) => {
                    self.finished = true;
                    self.events.end();
                }
                Err(e) => {
                    self.finished = true;
                    return Some(Err(UpstreamError::Unreachable {
                        url: self.url.clone(),
                        reason: format!("the stream broke off: {}", e.without_url()),
                    }));
                }
            }
        }
    }
}

fn chunk(data: &str) -> Result<Value, UpstreamError> {
    let chunk: Value = serde_json::from_str(data)
        .map_err(|e| UpstreamError::Malformed(format!("a stream event is not JSON ({e})")))?;
    if let Some(error) = chunk.get("error") {
        return Err(UpstreamError::Refused {
            status: error
                .get("code")
                .and_then(Value::as_u64)
                .map_or(500, |c| u16::try_from(c).unwrap_or(500)),
            message: refusal_message(&chunk.to_string()),
        });
    }
    Ok(chunk)
}

#[derive(Debug, PartialEq, Eq)]
enum Event {
    Data(String),
    Done,
}

/// Server-sent events, as bytes arrive in pieces of any size: each event's `data:` lines joined;
/// comments (`:`), `event:` and `id:` lines are not what a chat stream carries and are skipped.
#[derive(Debug, Default)]
struct EventReader {
    bytes: Vec<u8>,
    data: Vec<String>,
}

impl EventReader {
    fn push(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// The body ended: a last event without its blank line still counts.
    fn end(&mut self) {
        if !self.bytes.is_empty() && !self.bytes.ends_with(b"\n") {
            self.bytes.push(b'\n');
        }
        self.bytes.push(b'\n');
    }

    fn next_event(&mut self) -> Option<Event> {
        while let Some(newline) = self.bytes.iter().position(|&b| b == b'\n') {
            let raw: Vec<u8> = self.bytes.drain(..=newline).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if self.data.is_empty() {
                    continue;
                }
                let data = std::mem::take(&mut self.data).join("\n");
                return Some(if data.trim() == "[DONE]" {
                    Event::Done
                } else {
                    Event::Data(data)
                });
            }
            if let Some(data) = line.strip_prefix("data:") {
                self.data
                    .push(data.strip_prefix(' ').unwrap_or(data).to_string());
            } else if let Some(error) = line.strip_prefix("error:") {
                // llama.cpp's server reports a failure mid-stream on a line of its own.
                self.data.push(format!("{{\"error\":{}}}", error.trim()));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(pieces: &[&str]) -> Vec<Event> {
        let mut reader = EventReader::default();
        let mut found = Vec::new();
        for piece in pieces {
            reader.push(piece.as_bytes());
            while let Some(event) = reader.next_event() {
                found.push(event);
            }
        }
        reader.end();
        while let Some(event) = reader.next_event() {
            found.push(event);
        }
        found
    }

    #[test]
    fn events_are_read_whatever_the_pieces() {
        let stream = "data: {\"a\":1}\n\n: keep-alive\n\r\ndata: {\"b\":\r\ndata: 2}\r\n\r\ndata: [DONE]\n\n";
        let whole = events(&[stream]);
        assert_eq!(
            whole,
            vec![
                Event::Data("{\"a\":1}".into()),
                Event::Data("{\"b\":\n2}".into()),
                Event::Done
            ]
        );
        let bytewise: Vec<String> = stream.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytewise.iter().map(String::as_str).collect();
        assert_eq!(events(&pieces), whole);
    }

    #[test]
    fn a_last_event_without_its_blank_line_counts() {
        assert_eq!(events(&["data: {}"]), vec![Event::Data("{}".into())]);
    }

    #[test]
    fn an_error_mid_stream_is_a_refusal() {
        let found = events(&["error: {\"code\":500,\"message\":\"out of memory\"}\n\n"]);
        let Event::Data(data) = &found[0] else {
            panic!("{found:?}")
        };
        let error = chunk(data).expect_err("an error");
        assert!(
            matches!(&error, UpstreamError::Refused { status: 500, message } if message == "out of memory"),
            "{error}"
        );
    }

    #[test]
    fn urls_name_the_endpoint_and_debug_hides_the_key() {
        let root = Upstream::new("http://127.0.0.1:8080/", Some("sk-secret".into())).expect("url");
        assert_eq!(root.endpoint(), "http://127.0.0.1:8080/v1/chat/completions");
        assert!(!format!("{root:?}").contains("sk-secret"));
        let base = Upstream::new("https://api.example.com/v1", None).expect("url");
        assert_eq!(
            base.endpoint(),
            "https://api.example.com/v1/chat/completions"
        );
        for bad in ["", "ftp://x", "127.0.0.1:8080", "http://"] {
            assert!(Upstream::new(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_say_why_in_a_line() {
        assert_eq!(
            refusal_message(r#"{"error":{"message":"model not found","type":"x"}}"#),
            "model not found"
        );
        assert_eq!(refusal_message("Bad Gateway"), "Bad Gateway");
        assert_eq!(refusal_message(""), "(no reason given)");
        assert_eq!(refusal_message(&"x".repeat(1000)).len(), ERROR_TEXT_CHARS);
    }
}
