"""Column (d) of `aegis bench`: llama.cpp (llama-cpp-python) prefilling the exact prompt token ids
the guard builds, one validator prompt at a time, on the same GGUF file.

Usage: python bench_llama_cpp.py REQUEST.json  (written by `aegis bench`); prints JSON results.
"""

import json
import statistics
import sys
import time

from llama_cpp import Llama


def percentile(samples, p):
    ordered = sorted(samples)
    rank = round(p / 100 * (len(ordered) - 1))
    return ordered[min(rank, len(ordered) - 1)]


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    llm = Llama(
        model_path=request["model"],
        n_ctx=4096,
        n_batch=512,
        n_threads=request["threads"],
        n_threads_batch=request["threads"],
        verbose=False,
    )
    results = {}
    for name, prompts in request["cases"].items():
        # One warm-up verdict, then the timed ones.
        for ids in prompts:
            llm.reset()
            llm.eval(ids)
        samples = []
        for _ in range(request["runs"]):
            started = time.perf_counter()
            for ids in prompts:
                llm.reset()
                llm.eval(ids)
            samples.append((time.perf_counter() - started) * 1e3)
        results[name] = {
            "p50_ms": percentile(samples, 50),
            "p95_ms": percentile(samples, 95),
            "mean_ms": statistics.fmean(samples),
            "samples_ms": samples,
        }
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
