//! The heads' sentence encoder on a shared inference server: any server that answers the
//! OpenAI-compatible `POST /v1/embeddings` (llama.cpp's `llama-server --embeddings`, vLLM's pooling
//! runner, Text Embeddings Inference). The task prompt is put before each message here, and where
//! the server tokenizes like us (`/tokenize`) token ids are sent, so `<bos>`/`<eos>` and the
//! prompt boundary are ours, not the server's. Whether the server computes the embedding the heads
//! were trained on is not trusted: the caller embeds the heads' probe texts and compares
//! (`aegis_heads::EncoderFingerprint`).
//!
//! A server that pools nothing (`llama-server --pooling none`) refuses `/v1/embeddings` and
//! answers llama.cpp's own `POST /embeddings` with each token's state after the dense layers.
//! Those are what a head that pools token states reads (`aegis_heads::AttentionPooling`), and
//! their mean, normalised, is the sentence embedding (the dense layers are linear), so such a
//! server serves every head that reads the sentence embedding too.

use std::path::Path;
use std::sync::Arc;

use aegis_engine::{
    encoder_tokens, ComputePlan, EncoderInfo, EncoderOutput, EncoderReading, EngineError,
    GemmaTokenizer, SentenceEncoder, CLASSIFICATION_PROMPT,
};
use futures_util::future::join_all;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::client::{Client, ClientOptions};
use crate::{cached_tokenizer, identify, io_runtime, tokenizes_like_us, RemoteError};

/// EmbeddingGemma's context, where the server does not say its own.
const DEFAULT_ENCODER_CONTEXT: usize = 2048;

/// Messages per request: large enough for the server to batch, small enough that one slow or
/// failed request holds back few.
const INPUTS_PER_REQUEST: usize = 16;

/// Requests sent at once from one console: the worker's batch spreads over the server's slots,
/// and a team's consoles together cannot flood it.
const REQUESTS_IN_FLIGHT: usize = 4;

/// What the server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// One pooled, normalised embedding a message (`/v1/embeddings`).
    Pooled,
    /// Each token's state (`/embeddings` on `llama-server --pooling none`).
    TokenStates,
}

/// A sentence encoder served by another process.
pub struct RemoteEncoder {
    client: Client,
    /// `Some` until drop (see `RemoteModel`).
    runtime: Option<tokio::runtime::Runtime>,
    tokenizer: GemmaTokenizer,
    info: EncoderInfo,
    served: String,
    /// Token ids go out where the server tokenizes like us; otherwise the prompted text does.
    send_ids: bool,
    served_as: Served,
    in_flight: Arc<Semaphore>,
}

impl std::fmt::Debug for RemoteEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEncoder")
            .field("info", &self.info)
            .field("send_ids", &self.send_ids)
            .field("served_as", &self.served_as)
            .finish()
    }
}

impl RemoteEncoder {
    /// `connect` with the Gemma 3 tokenizer `scripts/setup-model.sh` caches (EmbeddingGemma's
    /// vocabulary is Gemma 3's), with the default client options.
    pub fn connect_with_cached_tokenizer(url: &str) -> Result<Self, RemoteError> {
        Self::connect(url, &cached_tokenizer()?, ClientOptions::default())
    }

    /// Connects to the embedding server at `url`: which model it serves, whether it tokenizes
    /// like `tokenizer_file` (then ids are sent), and the width of its embeddings.
    pub fn connect(
        url: &str,
        tokenizer_file: &Path,
        options: ClientOptions,
    ) -> Result<Self, RemoteError> {
        let runtime = io_runtime("aegis-encoder-server")?;
        let client = Client::new(url, options)?;
        let tokenizer = GemmaTokenizer::from_file(tokenizer_file)?;
        let (dialect, served, context) = runtime.block_on(identify(&client))?;
        let send_ids = runtime.block_on(tokenizes_like_us(
            &client,
            dialect,
            &served,
            &tokenizer,
            tokenizer_file,
        ))?;
        let mut encoder = Self {
            info: EncoderInfo {
                id: served.clone(),
                // A verdict names the server in place of a weight file's hash.
                content_hash: client.url().to_string(),
                prompt: CLASSIFICATION_PROMPT.to_string(),
                dimensions: 0,
                context_length: context
                    .unwrap_or(DEFAULT_ENCODER_CONTEXT)
                    .min(DEFAULT_ENCODER_CONTEXT),
                // Only the sentence embedding comes back: no layer can be read.
                layers: 0,
                device: "remote".into(),
                weight_format: format!("{} /v1/embeddings", dialect.name()),
                matches_weights: None,
            },
            client,
            runtime: Some(runtime),
            tokenizer,
            served,
            send_ids,
            served_as: Served::Pooled,
            in_flight: Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT)),
        };
        let pooled = encoder
            .embed_batch(&["ok"])
            .pop()
            .expect("one answer per text");
        let width = match pooled {
            Ok(embedding) => embedding.len(),
            // A server that pools nothing refuses `/v1/embeddings`; it may still serve each
            // token's state.
            Err(pooled_error) => match encoder.block_on(encoder.token_width()) {
                Ok(width) => {
                    encoder.served_as = Served::TokenStates;
                    width
                }
                Err(_) => return Err(pooled_error.into()),
            },
        };
        encoder.info.dimensions = width;
        if encoder.served_as == Served::TokenStates {
            encoder.info.weight_format = format!("{} /embeddings (token states)", dialect.name());
        }
        tracing::info!(url = %encoder.info.content_hash, model = %encoder.served, send_ids, dimensions = width, served_as = ?encoder.served_as, "encoder server connected");
        Ok(encoder)
    }

    /// Records that this server was shown, by the heads' probe texts, to compute the encoder
    /// whose weights hash to `content_hash`: heads trained on those weights read it.
    pub fn accept_as(&mut self, content_hash: &str) {
        self.info.accept_as(content_hash);
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("the runtime lives until drop")
            .block_on(future)
    }

    /// What one message is sent as: its token ids, or the prompted text.
    fn input(&self, text: &str) -> Result<Value, EngineError> {
        let ids = encoder_tokens(&self.tokenizer, &self.info, text)?;
        Ok(if self.send_ids {
            json!(ids)
        } else {
            json!(format!("{}{text}", self.info.prompt))
        })
    }

    /// One request's answers, in the inputs' order: each message's pooled embedding, or its
    /// token states row-major.
    async fn embed_request(&self, inputs: Vec<Value>) -> Result<Vec<Vec<f32>>, EngineError> {
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| self.client.error("the encoder connection is closed"))?;
        let count = inputs.len();
        match self.served_as {
            Served::Pooled => {
                let answer = self
                    .client
                    .post(
                        "/v1/embeddings",
                        &json!({"model": self.served, "input": inputs, "encoding_format": "float"}),
                    )
                    .await?;
                embeddings(&answer, count).map_err(|m| self.client.error(m))
            }
            Served::TokenStates => {
                let answer = self
                    .client
                    .post("/embeddings", &json!({"content": inputs}))
                    .await?;
                let states = token_states(&answer, count).map_err(|m| self.client.error(m))?;
                Ok(states.into_iter().map(|(rows, _)| rows).collect())
            }
        }
    }

    /// The width of the token states a server that pools nothing answers with.
    async fn token_width(&self) -> Result<usize, EngineError> {
        let answer = self
            .client
            .post("/embeddings", &json!({"content": [self.input("ok")?]}))
            .await?;
        let states = token_states(&answer, 1).map_err(|m| self.client.error(m))?;
        Ok(states[0].1)
    }

    /// What one message's answer gives the reading: a pooled embedding as it came, or the token
    /// states and their mean, normalised (the sentence embedding), as asked.
    fn output(&self, answer: Vec<f32>, reading: &EncoderReading) -> EncoderOutput {
        match self.served_as {
            Served::Pooled => EncoderOutput {
                layer_means: Vec::new(),
                embedding: Some(answer),
                token_states: None,
            },
            Served::TokenStates => EncoderOutput {
                layer_means: Vec::new(),
                embedding: (reading.embedding || !reading.token_states)
                    .then(|| normalised_mean(&answer, self.info.dimensions)),
                token_states: reading.token_states.then_some(answer),
            },
        }
    }
}

/// The mean of `rows` (row-major at `width`) scaled to length 1, as a pooling server normalises
/// it.
fn normalised_mean(rows: &[f32], width: usize) -> Vec<f32> {
    let width = width.max(1);
    let count = (rows.len() / width).max(1);
    let mut mean = vec![0.0f32; width];
    for row in rows.chunks_exact(width) {
        for (m, x) in mean.iter_mut().zip(row) {
            *m += x / count as f32;
        }
    }
    let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    mean.iter().map(|x| x / norm).collect()
}

/// The token states of each message in llama.cpp's `/embeddings` answer (`[{index, embedding:
/// [[token 0], [token 1], …]}]`), row-major with their width, in `index` order.
fn token_states(answer: &Value, count: usize) -> Result<Vec<(Vec<f32>, usize)>, String> {
    let items = answer
        .as_array()
        .ok_or("the /embeddings answer is not a list")?;
    if items.len() != count {
        return Err(format!(
            "{} messages' token states came back for {count} inputs",
            items.len()
        ));
    }
    let mut out = vec![(Vec::new(), 0); count];
    for (position, item) in items.iter().enumerate() {
        let index = item["index"].as_u64().map_or(position, |i| i as usize);
        let rows = item["embedding"]
            .as_array()
            .ok_or("a message's token states are not a list")?;
        let mut flat = Vec::new();
        let mut width = None;
        for row in rows {
            let row = row
                .as_array()
                .ok_or("a token's state is not a list of numbers")?;
            if *width.get_or_insert(row.len()) != row.len() || row.is_empty() {
                return Err("tokens' states differ in width".into());
            }
            for x in row {
                flat.push(
                    x.as_f64()
                        .ok_or("a token's state holds something other than numbers")?
                        as f32,
                );
            }
        }
        if flat.is_empty() {
            return Err("a message came back without token states".into());
        }
        *out.get_mut(index)
            .ok_or("a message's index is out of range")? = (flat, width.unwrap_or_default());
    }
    Ok(out)
}

/// The `data[].embedding` vectors of a `/v1/embeddings` answer, put in `index` order.
fn embeddings(answer: &Value, count: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = answer["data"]
        .as_array()
        .ok_or("no data in the embeddings answer")?;
    if data.len() != count {
        return Err(format!(
            "{} embeddings came back for {count} inputs",
            data.len()
        ));
    }
    let mut out = vec![Vec::new(); count];
    for (position, item) in data.iter().enumerate() {
        let index = item["index"].as_u64().map_or(position, |i| i as usize);
        let vector = item["embedding"]
            .as_array()
            .ok_or("an embedding is not a list of numbers (ask for encoding_format float)")?
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or("an embedding holds something other than numbers")?;
        *out.get_mut(index)
            .ok_or("an embedding's index is out of range")? = vector;
    }
    Ok(out)
}

/// The same failure for each message of a failed request: an unreachable server stays
/// unreachable (an import pauses on it), anything else names the server.
fn for_each_message(error: &EngineError) -> EngineError {
    match error {
        EngineError::BackendUnavailable { url, message } => EngineError::BackendUnavailable {
            url: url.clone(),
            message: message.clone(),
        },
        EngineError::Backend { url, message } => EngineError::Backend {
            url: url.clone(),
            message: message.clone(),
        },
        other => EngineError::Backend {
            url: String::new(),
            message: other.to_string(),
        },
    }
}

impl Drop for RemoteEncoder {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl SentenceEncoder for RemoteEncoder {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn probe(&self) -> aegis_engine::Result<()> {
        self.block_on(self.client.probe("/health"))
    }

    /// Requests of a few messages each go out together, a bounded number at a time; a message
    /// too long for the server fails alone.
    fn read_batch(
        &self,
        texts: &[&str],
        reading: &EncoderReading,
    ) -> Vec<aegis_engine::Result<EncoderOutput>> {
        let refusal = if !reading.layers.is_empty() {
            Some("a server returns only the sentence embedding, not a layer's states; retrain the head on the embedding")
        } else if reading.token_states && self.served_as == Served::Pooled {
            Some("this server pools its embeddings; a head that pools token states needs one that pools nothing (llama-server --pooling none)")
        } else {
            None
        };
        if let Some(refusal) = refusal {
            return texts
                .iter()
                .map(|_| Err(self.client.error(refusal)))
                .collect();
        }
        let mut results: Vec<Option<aegis_engine::Result<EncoderOutput>>> =
            texts.iter().map(|_| None).collect();
        let mut ready = Vec::new();
        for (position, text) in texts.iter().enumerate() {
            match self.input(text) {
                Ok(input) => ready.push((position, input)),
                Err(e) => results[position] = Some(Err(e)),
            }
        }
        let chunks: Vec<Vec<(usize, Value)>> = ready
            .chunks(INPUTS_PER_REQUEST)
            .map(<[_]>::to_vec)
            .collect();
        let answers = self.block_on(join_all(chunks.into_iter().map(|chunk| async move {
            let (positions, inputs): (Vec<usize>, Vec<Value>) = chunk.into_iter().unzip();
            (positions, self.embed_request(inputs).await)
        })));
        for (positions, answer) in answers {
            match answer {
                Ok(vectors) => {
                    for (position, vector) in positions.into_iter().zip(vectors) {
                        results[position] = Some(Ok(self.output(vector, reading)));
                    }
                }
                Err(e) => {
                    for position in positions {
                        results[position] = Some(Err(for_each_message(&e)));
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every message is answered or failed"))
            .collect()
    }

    /// The tokens sent; the work is the server's, so no FLOPs are counted here.
    fn plan(&self, text: &str, _reading: &EncoderReading) -> aegis_engine::Result<ComputePlan> {
        let tokens = encoder_tokens(&self.tokenizer, &self.info, text)?.len();
        Ok(ComputePlan {
            prompt_tokens: tokens,
            computed_tokens: tokens,
            flops: 0.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_put_in_index_order_and_a_short_answer_is_an_error() {
        let answer = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(
            embeddings(&answer, 2),
            Ok(vec![vec![1.0, 0.0], vec![0.0, 1.0]])
        );
        assert!(embeddings(&answer, 3).unwrap_err().contains("2 embeddings"));
        let base64 = json!({"data": [{"index": 0, "embedding": "AAAA"}]});
        assert!(embeddings(&base64, 1).unwrap_err().contains("float"));
    }

    #[test]
    fn token_states_are_read_row_major_in_index_order_and_ragged_rows_refused() {
        let answer = json!([
            {"index": 1, "embedding": [[1.0, 2.0]]},
            {"index": 0, "embedding": [[0.0, 1.0], [3.0, 4.0]]}
        ]);
        assert_eq!(
            token_states(&answer, 2),
            Ok(vec![(vec![0.0, 1.0, 3.0, 4.0], 2), (vec![1.0, 2.0], 2)])
        );
        assert!(token_states(&answer, 1).unwrap_err().contains("2 messages"));
        let ragged = json!([{"index": 0, "embedding": [[0.0, 1.0], [3.0]]}]);
        assert!(token_states(&ragged, 1).unwrap_err().contains("width"));
        let empty = json!([{"index": 0, "embedding": []}]);
        assert!(token_states(&empty, 1).is_err());
    }

    #[test]
    fn the_mean_of_token_states_is_normalised_as_a_pooled_embedding() {
        let mean = normalised_mean(&[3.0, 0.0, 3.0, 8.0], 2);
        assert!(
            (mean[0] - 0.6).abs() < 1e-6 && (mean[1] - 0.8).abs() < 1e-6,
            "{mean:?}"
        );
    }

    #[test]
    fn a_failed_request_fails_each_of_its_messages_the_same_way() {
        let down = EngineError::BackendUnavailable {
            url: "http://gpu:8080".into(),
            message: "nothing answers".into(),
        };
        assert!(matches!(
            for_each_message(&down),
            EngineError::BackendUnavailable { .. }
        ));
    }
}
