"""Time to first token and tokens per second straight from an upstream and through the guard.

    python bench_guarded_chat.py UPSTREAM_URL GUARD_URL [ROUNDS]

Each round asks every prompt once per way (direct, guard with "release": "checked", guard with
"immediate"), in turn, so a warm cache or a busy moment falls on each way alike. Printed as a
Markdown table: medians over all requests; tokens are the upstream's chunks (one token each on
llama.cpp). Run by scripts/bench-guarded-chat.sh, which starts both servers.
"""

import statistics
import sys
import time

from openai import OpenAI

PROMPTS = [
    "Explain in three sentences why the sky is blue.",
    "Tulis tiga kalimat tentang cara merawat tanaman hias di rumah.",
    "Give me two tips for writing a clear email to a colleague.",
    "Apa bedanya kopi arabika dan robusta? Jelaskan singkat.",
]
TOKENS = 96

upstream, guard = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
ways = {
    "direct": (OpenAI(base_url=upstream + "/v1", api_key="x", max_retries=0), None),
    "guard, checked": (OpenAI(base_url=guard + "/v1", api_key="x", max_retries=0), "checked"),
    "guard, immediate": (OpenAI(base_url=guard + "/v1", api_key="x", max_retries=0), "immediate"),
}
figures = {name: {"first": [], "rate": [], "checks": [], "check_ms": [], "cut": 0} for name in ways}


def one(client, release, prompt):
    extra = {"aegis": {"release": release}} if release else {}
    started = time.perf_counter()
    first, pieces, checks, finish, check_ms = None, 0, 0, None, []
    for chunk in client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": prompt}], stream=True,
        max_tokens=TOKENS, temperature=0, extra_body=extra,
    ):
        report = (chunk.model_extra or {}).get("aegis")
        if report:
            checks += 1
            check_ms.append(report.get("latency_ms", 0))
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        if choice.delta and choice.delta.content:
            if first is None:
                first = time.perf_counter() - started
            pieces += 1
        finish = choice.finish_reason or finish
    return first, time.perf_counter() - started, checks, pieces, finish, check_ms


# Tokens are counted on the direct answers (one chunk a token): at temperature 0 the upstream writes
# the same answer each way, and the guard's checked release joins several tokens into one chunk.
tokens = {}
for _ in range(rounds):
    for prompt in PROMPTS:
        for name, (client, release) in ways.items():
            first, total, checks, pieces, finish, check_ms = one(client, release, prompt)
            if name == "direct":
                tokens[prompt] = pieces
            figure = figures[name]
            figure["first"].append(first or total)
            figure["rate"].append(tokens[prompt] / total)
            figure["checks"].append(checks)
            figure["check_ms"].extend(check_ms)
            figure["cut"] += finish == "content_filter"

direct_rate = statistics.median(figures["direct"]["rate"])
print("| way | first token, median | tokens per second, median | vs direct | checks per answer | a check of the answer, median | answers cut |")
print("|---|---|---|---|---|---|---|")
for name, figure in figures.items():
    rate = statistics.median(figure["rate"])
    print(
        f"| {name} | {statistics.median(figure['first']) * 1000:.0f} ms | {rate:.1f} "
        f"| {rate / direct_rate:.2f} | {statistics.mean(figure['checks']):.1f} "
        f"| {statistics.median(figure['check_ms']) if figure['check_ms'] else 0:.0f} ms | {figure['cut']} |"
    )
