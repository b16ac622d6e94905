"""The encoder's peer on the same GPU: EmbeddingGemma through `sentence-transformers` (PyTorch), on
the same folder `aegis` reads, in bf16, with the classification prompt the heads read. It embeds
only (no heads, no verdict): a floor for what a verdict costs in PyTorch, so the ratio beside
`aegis bench` flatters PyTorch, if anything.

Usage: python bench_encoder_st.py FOLDER BENCH.json OUT.json [SECONDS]
  BENCH.json: `aegis bench --json`'s report, whose rows carry the short, medium and long texts.
Prints and writes: p50/p95 ms of one text per length; texts per second at batch sizes 1, 8, 32
and 128 of the short text made distinct (the batch a server would form from that many waiting
clients; `aegis bench` sends the same kind of text through its worker).
"""

import json
import sys
import time

import torch
from sentence_transformers import SentenceTransformer


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(round(p / 100 * (len(ordered) - 1)), len(ordered) - 1)]


def main():
    folder, bench_path, out_path = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 4.0
    rows = json.load(open(bench_path, encoding="utf-8"))["lengths"]
    names = [row["length"] for row in rows]
    lengths = [row["text"] for row in rows]
    short = lengths[0]
    model = SentenceTransformer(folder, device="cuda").to(torch.bfloat16).eval()
    prompt = model.prompts.get("Classification", "task: classification | query: ")

    def embed(batch):
        with torch.inference_mode():
            model.encode(batch, prompt=prompt, batch_size=len(batch), convert_to_tensor=True)
        torch.cuda.synchronize()

    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "latency": []}
    for name, text in zip(names, lengths):
        for _ in range(3):
            embed([text])
        samples = []
        for _ in range(20):
            started = time.perf_counter()
            embed([text])
            samples.append((time.perf_counter() - started) * 1e3)
        tokens = len(model.tokenizer(prompt + text)["input_ids"])
        row = {"message": name, "tokens": tokens, "p50_ms": percentile(samples, 50),
               "p95_ms": percentile(samples, 95)}
        result["latency"].append(row)
        print(f"{name} ({tokens} tokens): p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms")
    result["throughput"] = []
    for batch_size in [1, 8, 32, 128]:
        done, started, i = 0, time.perf_counter(), 0
        while time.perf_counter() - started < seconds:
            batch = [f"{short} ({i + j})" for j in range(batch_size)]
            embed(batch)
            done += batch_size
            i += batch_size
        rate = done / (time.perf_counter() - started)
        result["throughput"].append({"batch": batch_size, "texts_per_s": rate})
        print(f"batch {batch_size}: {rate:.0f} texts/s")
    result["peak_memory_mib"] = torch.cuda.max_memory_allocated() / 2**20
    json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
