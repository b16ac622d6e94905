#!/usr/bin/env python3
"""Writes a synthetic EmbeddingGemma-300M folder: the sentence-transformers layout, config and
tensor names and shapes of the real one, seeded random weights (std 0.02, Gemma's initialiser;
norm weights zero, i.e. a scale of one), and a tokenizer.json copied from the path given.

Its embeddings mean nothing. It exists so that the encoder's GPU path can be checked against the
CPU (the engine's test `encoder::cuda::gpu_embeddings_agree_with_the_cpu`) and timed on a GPU
machine the real 1.2 GB of weights cannot reach (the device tool carries 64 MiB a call).

    python3 scripts/reference/synthetic_encoder.py --tokenizer tokenizer.json --out /tmp/encoder

Needs numpy only: safetensors is a JSON header and raw little-endian bytes.
"""

import argparse
import json
import shutil
import struct
from pathlib import Path

import numpy as np

HIDDEN, INTERMEDIATE, LAYERS, HEAD_DIM, HEADS, KV_HEADS, VOCAB = 768, 1152, 24, 256, 3, 1, 262144
DENSE = 3072

CONFIG = {
    "architectures": ["Gemma3TextModel"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_logit_softcapping": None,
    "bos_token_id": 2,
    "dtype": "float32",
    "eos_token_id": 1,
    "final_logit_softcapping": None,
    "head_dim": HEAD_DIM,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": HIDDEN,
    "initializer_range": 0.02,
    "intermediate_size": INTERMEDIATE,
    "layer_types": [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(LAYERS)
    ],
    "max_position_embeddings": 2048,
    "model_type": "gemma3_text",
    "num_attention_heads": HEADS,
    "num_hidden_layers": LAYERS,
    "num_key_value_heads": KV_HEADS,
    "pad_token_id": 0,
    "query_pre_attn_scalar": HEAD_DIM,
    "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": 512,
    "use_bidirectional_attention": True,
    "vocab_size": VOCAB,
    "aegis_synthetic": True,
}


def tensors():
    yield "embed_tokens.weight", (VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = f"layers.{i}."
        for norm in ["input_layernorm", "post_attention_layernorm",
                     "pre_feedforward_layernorm", "post_feedforward_layernorm"]:
            yield p + norm + ".weight", (HIDDEN,)
        yield p + "self_attn.q_norm.weight", (HEAD_DIM,)
        yield p + "self_attn.k_norm.weight", (HEAD_DIM,)
        yield p + "self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN)
        yield p + "self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN)
        yield p + "self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN)
        yield p + "self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM)
        yield p + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN)
        yield p + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN)
        yield p + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE)
    yield "norm.weight", (HIDDEN,)


def write_safetensors(path, named_shapes, rng):
    """Writes f32 tensors one at a time, so memory stays at the largest tensor."""
    header, offset = {"__metadata__": {"format": "pt", "aegis.synthetic": "true"}}, 0
    for name, shape in named_shapes:
        size = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(raw)))
        out.write(raw)
        for name, shape in named_shapes:
            if name.endswith("norm.weight"):
                values = np.zeros(shape, dtype="<f4")
            else:
                values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype("<f4")
            out.write(values.tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="the Gemma 3 tokenizer.json to copy")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    out, rng = Path(args.out), np.random.default_rng(args.seed)
    for sub in ["1_Pooling", "2_Dense", "3_Dense", "4_Normalize"]:
        (out / sub).mkdir(parents=True, exist_ok=True)
    write = lambda path, value: (out / path).write_text(json.dumps(value, indent=2))
    write("config.json", CONFIG)
    modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense"),
               ("3_Dense", "Dense"), ("4_Normalize", "Normalize")]
    write("modules.json", [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(modules)
    ])
    write("1_Pooling/config.json", {
        "word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False, "include_prompt": True,
    })
    for path, (inp, outp) in [("2_Dense", (HIDDEN, DENSE)), ("3_Dense", (DENSE, HIDDEN))]:
        write(f"{path}/config.json", {"in_features": inp, "out_features": outp, "bias": False,
                                      "activation_function": "torch.nn.modules.linear.Identity"})
        write_safetensors(out / path / "model.safetensors", [("linear.weight", (outp, inp))], rng)
    write("config_sentence_transformers.json", {
        "model_type": "SentenceTransformer",
        "prompts": {"Classification": "task: classification | query: "},
        "default_prompt_name": None, "similarity_fn_name": "cosine",
    })
    write_safetensors(out / "model.safetensors", list(tensors()), rng)
    shutil.copyfile(args.tokenizer, out / "tokenizer.json")
    print(f"synthetic EmbeddingGemma-300M written to {out}")


if __name__ == "__main__":
    main()
