//! What each kind of server is asked and how its answers read: llama.cpp's own server
//! (`/completion`, `/tokenize`, `/props`) and the OpenAI-compatible completions API as vLLM serves
//! it (`/v1/completions`, `/tokenize`, `/v1/models`). Pure functions over JSON, so every field is
//! tested without a server.

use serde_json::{json, Value};

/// Which API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// llama.cpp's `llama-server`: native endpoints, log-probabilities keyed by token id.
    LlamaCpp,
    /// vLLM (or another server with its OpenAI-compatible completions and `/tokenize`).
    OpenAi,
}

/// How many of the answer position's most likely tokens vLLM is asked for: `Yes` and `No` must
/// both be among them. Its default `--max-logprobs` is 20, so more would be refused there; an
/// instruction-tuned model asked a yes/no question ranks both near the top.
pub const VLLM_TOP_LOGPROBS: usize = 20;

/// Added to both answer tokens' logits on llama.cpp so they are the two most likely whatever the
/// model prefers (the 270M base ranks `No` as low as 74th on the shipped prompts). Adding the same
/// constant to both leaves their two-way softmax unchanged; float32 keeps about 1e-5 of a logit at
/// this size. A token more than this far below the best is reported missing.
const ANSWER_BIAS: f32 = 100.0;

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Self::LlamaCpp => "llama.cpp server",
            Self::OpenAi => "OpenAI-compatible server",
        }
    }

    pub fn completion_path(self) -> &'static str {
        match self {
            Self::LlamaCpp => "/completion",
            Self::OpenAi => "/v1/completions",
        }
    }

    /// One step after `ids` (token ids: the server never parses our text, so user text cannot
    /// become control tokens there either), reporting how likely the `answers` (Yes, No) are.
    pub fn score_request(
        self,
        model: &str,
        ids: &[u32],
        answers: [u32; 2],
        reuse_cache: bool,
    ) -> Value {
        match self {
            // A prompt of token ids gets no BOS added (ours is already first). Both answers get
            // the same bias, the sampler keeps the two best, and the probabilities reported
            // after sampling are then exactly the two-way softmax over Yes and No.
            Self::LlamaCpp => json!({
                "prompt": ids,
                "n_predict": 1,
                "logit_bias": [[answers[0], ANSWER_BIAS], [answers[1], ANSWER_BIAS]],
                "samplers": ["top_k", "temperature"],
                "top_k": 2,
                "temperature": 1.0,
                "n_probs": 2,
                "post_sampling_probs": true,
                "cache_prompt": reuse_cache,
            }),
            // vLLM reports log-probabilities before any logit bias, so the answers must be
            // among its top list as they are.
            Self::OpenAi => json!({
                "model": model,
                "prompt": ids,
                "max_tokens": 1,
                "temperature": 0.0,
                "logprobs": VLLM_TOP_LOGPROBS,
                "return_tokens_as_token_ids": true,
            }),
        }
    }

    /// How many tokens the server's answer lists, for saying what a missing one means.
    pub fn listed(self) -> usize {
        match self {
            Self::LlamaCpp => 2,
            Self::OpenAi => VLLM_TOP_LOGPROBS,
        }
    }

    /// The log-probabilities of `wanted` tokens at the answer position, `None` where the server's
    /// top list left a token out.
    pub fn answer_logprobs(
        self,
        answer: &Value,
        wanted: [u32; 2],
    ) -> Result<[Option<f32>; 2], String> {
        let top: Vec<(u32, f32)> = match self {
            // After sampling llama.cpp lists probabilities, not their logarithms.
            Self::LlamaCpp => answer["completion_probabilities"][0]["top_probs"]
                .as_array()
                .ok_or("no completion_probabilities[0].top_probs in the answer")?
                .iter()
                .filter_map(|t| Some((t["id"].as_u64()? as u32, t["prob"].as_f64()?.ln() as f32)))
                .collect(),
            Self::OpenAi => answer["choices"][0]["logprobs"]["top_logprobs"][0]
                .as_object()
                .ok_or("no choices[0].logprobs.top_logprobs[0] in the answer")?
                .iter()
                .filter_map(|(token, logprob)| {
                    let id = token.strip_prefix("token_id:")?.parse().ok()?;
                    Some((id, logprob.as_f64()? as f32))
                })
                .collect(),
        };
        if top.is_empty() {
            return Err("the answer lists no log-probabilities".into());
        }
        Ok(wanted.map(|id| top.iter().find(|(t, _)| *t == id).map(|(_, lp)| *lp)))
    }

    /// Greedy text after `ids`, at most `max_tokens`, ending at the model's end of turn.
    pub fn generate_request(
        self,
        model: &str,
        ids: &[u32],
        max_tokens: usize,
        stops: [u32; 2],
        reuse_cache: bool,
    ) -> Value {
        match self {
            // llama.cpp stops at the vocabulary's end-of-generation tokens by itself.
            Self::LlamaCpp => json!({
                "prompt": ids,
                "n_predict": max_tokens,
                "temperature": -1.0,
                "cache_prompt": reuse_cache,
            }),
            Self::OpenAi => json!({
                "model": model,
                "prompt": ids,
                "max_tokens": max_tokens,
                "temperature": 0.0,
                "stop_token_ids": stops,
            }),
        }
    }

    pub fn generated_text(self, answer: &Value) -> Result<String, String> {
        let text = match self {
            Self::LlamaCpp => answer["content"].as_str(),
            Self::OpenAi => answer["choices"][0]["text"].as_str(),
        };
        text.map(str::to_string)
            .ok_or_else(|| "no generated text in the answer".into())
    }

    /// The server's own tokens for `text` taken as plain text (no BOS, no control tokens).
    pub fn tokenize_request(self, model: &str, text: &str) -> Value {
        match self {
            Self::LlamaCpp => {
                json!({"content": text, "add_special": false, "parse_special": false})
            }
            Self::OpenAi => json!({"model": model, "prompt": text, "add_special_tokens": false}),
        }
    }

    pub fn tokens(answer: &Value) -> Result<Vec<u32>, String> {
        answer["tokens"]
            .as_array()
            .ok_or("no tokens in the answer")?
            .iter()
            .map(|t| {
                t.as_u64()
                    .map(|id| id as u32)
                    .ok_or("a token id is not a number".into())
            })
            .collect()
    }
}

/// What `/v1/models` says the server serves: its name and, where it says, its context length.
pub fn served_model(models: &Value) -> Result<(String, Option<usize>), String> {
    let first = &models["data"][0];
    let id = first["id"]
        .as_str()
        .ok_or("/v1/models lists no model")?
        .to_string();
    // vLLM: max_model_len; llama.cpp: meta.n_ctx_train (the server's own n_ctx is in /props).
    let context = first["max_model_len"].as_u64().map(|n| n as usize);
    Ok((id, context))
}

/// llama.cpp's `/props`: the context each request may use.
pub fn llama_cpp_context(props: &Value) -> Option<usize> {
    props["default_generation_settings"]["n_ctx"]
        .as_u64()
        .or_else(|| props["n_ctx"].as_u64())
        .map(|n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_send_token_ids_and_ask_for_one_step_with_top_logprobs() {
        let llama = Dialect::LlamaCpp.score_request("m", &[2, 105, 7], [20, 10], true);
        assert_eq!(llama["prompt"], json!([2, 105, 7]));
        assert_eq!(llama["n_predict"], 1);
        assert_eq!(llama["logit_bias"], json!([[20, 100.0], [10, 100.0]]));
        assert_eq!(llama["top_k"], 2);
        assert_eq!(llama["post_sampling_probs"], true);
        let vllm = Dialect::OpenAi.score_request("gemma", &[2, 105, 7], [20, 10], true);
        assert_eq!(vllm["prompt"], json!([2, 105, 7]));
        assert_eq!(vllm["model"], "gemma");
        assert_eq!(vllm["max_tokens"], 1);
        assert_eq!(vllm["logprobs"], VLLM_TOP_LOGPROBS);
        assert_eq!(vllm["return_tokens_as_token_ids"], true);
    }

    #[test]
    fn answers_are_read_by_token_id_and_a_missing_token_is_none() {
        let llama = json!({"completion_probabilities": [{"id": 10, "top_probs": [
            {"id": 10, "prob": 0.75, "token": "No"}, {"id": 20, "prob": 0.25, "token": "Yes"}
        ]}]});
        assert_eq!(
            Dialect::LlamaCpp.answer_logprobs(&llama, [20, 10]),
            Ok([Some(0.25f64.ln() as f32), Some(0.75f64.ln() as f32)])
        );
        assert_eq!(
            Dialect::LlamaCpp.answer_logprobs(&llama, [20, 99]),
            Ok([Some(0.25f64.ln() as f32), None])
        );
        let vllm = json!({"choices": [{"text": "No", "logprobs": {"top_logprobs": [
            {"token_id:10": -0.1, "token_id:20": -2.5}
        ]}}]});
        assert_eq!(
            Dialect::OpenAi.answer_logprobs(&vllm, [20, 10]),
            Ok([Some(-2.5), Some(-0.1)])
        );
        assert!(Dialect::OpenAi.answer_logprobs(&json!({}), [1, 2]).is_err());
    }

    #[test]
    fn model_names_contexts_tokens_and_text_are_read_from_either_server() {
        let vllm = json!({"data": [{"id": "google/gemma-3-4b-it", "max_model_len": 8192}]});
        assert_eq!(
            served_model(&vllm),
            Ok(("google/gemma-3-4b-it".to_string(), Some(8192)))
        );
        assert!(served_model(&json!({"data": []})).is_err());
        let props = json!({"default_generation_settings": {"n_ctx": 4096}});
        assert_eq!(llama_cpp_context(&props), Some(4096));
        assert_eq!(Dialect::tokens(&json!({"tokens": [1, 2]})), Ok(vec![1, 2]));
        assert_eq!(
            Dialect::LlamaCpp.generated_text(&json!({"content": "Maaf."})),
            Ok("Maaf.".to_string())
        );
        assert_eq!(
            Dialect::OpenAi.generated_text(&json!({"choices": [{"text": "Sorry."}]})),
            Ok("Sorry.".to_string())
        );
    }
}
