"""Column (e) of `aegis bench`: the original AEGIS Shield method in PyTorch with `transformers`, on an
HF Gemma 3 model of the engine's exact shape, randomly initialised in bf16 on the GPU.

The original service sends each validator's prompt to `model.generate` (the four LangGraph nodes
share one model, so on one GPU their generations take turns), parses the answer, and generates a
rejection message when any validator fails. This script does exactly that with the same prompt
token ids the guard builds: per validator, greedy generation of `answer_tokens` new tokens; then
the rejection prompt, `rejection_tokens` new tokens. Random weights never emit an end-of-turn
token, so every generation runs to its limit and the rejection is always written: the timings are
the original's failing-message path, its slowest and most common in moderation queues.

Usage: python bench_transformers.py REQUEST.json  (written by `aegis bench`); prints JSON results.
"""

import json
import sys
import time

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig


def percentile(samples, p):
    ordered = sorted(samples)
    rank = round(p / 100 * (len(ordered) - 1))
    return ordered[min(rank, len(ordered) - 1)]


def build_model(shape, device):
    rope_scaling = None
    if shape["rope_global_scale"] != 1.0:
        rope_scaling = {"rope_type": "linear", "factor": shape["rope_global_scale"]}
    config = Gemma3TextConfig(
        vocab_size=shape["vocab_size"],
        hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"],
        num_hidden_layers=shape["num_layers"],
        num_attention_heads=shape["num_heads"],
        num_key_value_heads=shape["num_kv_heads"],
        head_dim=shape["head_dim"],
        sliding_window=shape["sliding_window"],
        rope_theta=shape["rope_global_base"],
        rope_local_base_freq=shape["rope_local_base"],
        rope_scaling=rope_scaling,
        query_pre_attn_scalar=int(shape["query_pre_attn_scalar"]),
        max_position_embeddings=shape["context_length"],
    )
    torch.manual_seed(0)
    # Initialise directly on the device in bf16: a 4B model built on the CPU in f32 takes minutes.
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = Gemma3ForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    model.eval()
    # Random weights: keep generation from stopping early on a sampled end-of-turn id.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def generate(model, ids, new_tokens, device):
    inputs = torch.tensor([ids], device=device)
    with torch.inference_mode():
        out = model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=new_tokens,
            do_sample=False,
        )
    return out.shape[1] - inputs.shape[1]


def original_method(model, prompts, rejection, request, device):
    generated = 0
    for ids in prompts:
        generated += generate(model, ids, request["answer_tokens"], device)
    generated += generate(model, rejection, request["rejection_tokens"], device)
    return generated


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    device = request.get("device", "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench_transformers: torch sees no GPU")
    model = build_model(request["shape"], device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    results = {"torch": torch.__version__, "device": device}
    for name, prompts in request["cases"].items():
        original_method(model, prompts, request["rejection"], request, device)  # warm-up
        samples, generated = [], 0
        for _ in range(request["runs"]):
            sync()
            started = time.perf_counter()
            generated = original_method(model, prompts, request["rejection"], request, device)
            sync()
            samples.append((time.perf_counter() - started) * 1e3)
        results[name] = {
            "p50_ms": percentile(samples, 50),
            "p95_ms": percentile(samples, 95),
            "samples_ms": samples,
            "generated_tokens": generated,
        }
    if device.startswith("cuda"):
        results["peak_memory_mib"] = torch.cuda.max_memory_allocated() / 2**20
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
