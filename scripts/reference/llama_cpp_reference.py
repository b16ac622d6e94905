#!/usr/bin/env python3
"""Reference logits for our Gemma 3 forward pass: llama.cpp on the same GGUF file, and a float64
NumPy forward (numpy_gemma3.py) on its dequantized weights.

Writes crates/aegis-engine/tests/fixtures/llama_cpp_reference.json, which the engine's real-model
tests compare against. Re-run after changing the prompts below, or to check a new llama.cpp:

    pip install llama-cpp-python==0.3.36 gguf==0.19.0 numpy
    python3 scripts/reference/llama_cpp_reference.py [MODEL.gguf]

llama.cpp is an independent implementation (C++, its own tokenizer and kernels), so agreement
means our loading, tokenisation and forward pass are right, not merely self-consistent.
"""
import hashlib
import json
import os
import sys

import llama_cpp
import numpy as np

from numpy_gemma3 import Gemma3

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "crates/aegis-engine/tests/fixtures/llama_cpp_reference.json")
DEFAULT_MODEL = os.path.join(
    os.environ.get("AEGIS_MODEL_DIR")
    or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aegis/models/gemma-3-270m"),
    "gemma-3-270m-q4_k_m.gguf",
)

LONG = " ".join(
    f"Item {i}: the committee reviewed report number {i * 7} and approved the budget line."
    for i in range(40)
)
PROMPTS = [
    "<start_of_turn>user\nIs the following message spam? Message: \"Selamat! Anda memenangkan hadiah 10 juta, klik link ini\"\nAnswer Yes or No.<end_of_turn>\n<start_of_turn>model\n",
    "The capital of France is",
    "Bagaimana cara top up saldo?",
    "<start_of_turn>user\nSummarise:\n" + LONG + "<end_of_turn>\n<start_of_turn>model\n",
]
PROBE_IDS = [0, 1, 2, 106, 3771, 10784, 8438, 2301, 1000, 50000, 100000, 150000, 200000, 262143]
GREEDY_STEPS = 8


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    with open(model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_batch=2048, n_threads=os.cpu_count(),
                          logits_all=True, verbose=False, seed=0)
    exact = Gemma3(model)
    cases = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        top = np.argsort(-logits)[:10]
        exact_logits = exact.forward(ids)
        greedy, margins = [], []
        seq = list(ids)
        last = logits
        for _ in range(GREEDY_STEPS):
            nxt = int(np.argmax(last))
            greedy.append(nxt)
            two = np.sort(last)[-2:]
            margins.append(float(two[1] - two[0]))
            llm.eval([nxt])
            seq.append(nxt)
            last = np.array(llm.scores[len(seq) - 1], dtype=np.float64)
        cases.append({
            "prompt": prompt,
            "ids": ids,
            "top_ids": [int(i) for i in top],
            "top_logits": [float(logits[i]) for i in top],
            "probe_ids": PROBE_IDS,
            "probe_logits": [float(logits[i]) for i in PROBE_IDS],
            "greedy": greedy,
            # llama.cpp's margin between its first and second choice at each greedy step: a step
            # closer than the two implementations' rounding difference is a coin toss.
            "greedy_margins": margins,
            "f64_logits": [float(x) for x in exact_logits[np.concatenate([top, PROBE_IDS])]],
        })
        print(f"{len(ids):5d} tokens, top {top[:3].tolist()}, greedy {llm.detokenize(greedy)!r}")
    out = {
        "generator": f"llama-cpp-python {llama_cpp.__version__}",
        "model_sha256": sha,
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
