"""The heads' encoder on a shared server against the local one, side by side, through `aegis serve`.

    python3 scripts/bench_encoder_server.py AEGIS LLAMA_SERVER GGUF MESSAGES.jsonl [--messages 1000]

Starts `llama-server --embeddings` on the EmbeddingGemma GGUF, then for each way the heads read
(the local encoder; `--encoder-server`) an `aegis serve` with its own history database, and sends
the first N messages of MESSAGES (a `{"text": ...}` per line) to `POST /validate` from 1 and from
32 concurrent clients. Prints verdicts a second, p50/p95 latency, how many were answered 200 and
how many the history recorded, and what connecting and checking the server's fingerprint cost
(from `aegis serve`'s own log). Then llama.cpp's own time per embedding (one client, one message
a request, token ids) on a short, a medium and a long message: the peer the local encoder is
compared with (`aegis bench --fast-only` gives the local encoder's times for the same lengths).
Standard library only.
"""
import argparse
import concurrent.futures
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, seconds=300):
    """Until `/health` answers 200 and, from `aegis serve`, says its model is ready."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                body = json.loads(r.read() or b"{}")
                if r.status == 200 and body.get("model", {}).get("state", "ready") == "ready":
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    sys.exit(f"{url} was not ready within {seconds} s")


def post(url, body, timeout=600):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            payload = json.load(r)
            return r.status, payload, time.perf_counter() - started
    except urllib.error.HTTPError as e:
        return e.code, None, time.perf_counter() - started


def drive(url, texts, clients):
    def one(i):
        return post(url + "/validate", {"user_id": f"bench-{i % clients}", "question": texts[i]})

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(one, range(len(texts))))
    elapsed = time.perf_counter() - started
    latencies = sorted(a[2] * 1e3 for a in answers)
    return {
        "clients": clients,
        "messages": len(texts),
        "ok": sum(a[0] == 200 for a in answers),
        "verdicts_per_s": len(texts) / elapsed,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
    }


def recorded(aegis, db):
    """Verdicts in the history (`history stats` counts validator results, four a verdict)."""
    out = subprocess.run([aegis, "history", "list", "--json", "--limit", "100000", "--db", db],
                         capture_output=True, text=True)
    return len(json.loads(out.stdout or "{}").get("rows", []))


def serve_and_drive(aegis, texts, extra, label):
    port = free_port()
    work = tempfile.mkdtemp()
    db = os.path.join(work, "history.db")
    log = open(os.path.join(work, "serve.log"), "w+")
    env = dict(os.environ, AEGIS_LOG="aegis_runtime=info,warn", NO_COLOR="1")
    serve = subprocess.Popen([aegis, "serve", "--port", str(port), "--db", db, "--queue", "256", *extra],
                             stdout=log, stderr=log, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url)
        drive(url, texts[:16], 4)  # warm-up, not counted
        before = recorded(aegis, db)
        runs = [drive(url, texts, clients) for clients in (1, 32)]
        for run in runs:
            run["way"] = label
        recorded_now = recorded(aegis, db) - before
        log.seek(0)
        checked = re.findall(r"encoder server checked elapsed_ms=(\d+)", log.read())
        return runs, recorded_now, checked
    finally:
        serve.terminate()
        serve.wait()


def peer_times(url, runs=7):
    lengths = {"short": 1, "medium": 6, "long": 50}
    sentence = "Halo kak, pesanan saya nomor 12345 belum sampai, tolong dicek ya. "
    out = {}
    for name, repeat in lengths.items():
        status, tokens, _ = post(url + "/tokenize", {"content": "task: classification | query: " + sentence * repeat, "add_special": True})
        ids = tokens["tokens"]
        times = [post(url + "/v1/embeddings", {"input": [ids]})[2] * 1e3 for _ in range(runs)]
        out[name] = {"tokens": len(ids), "p50_ms": statistics.median(times[1:])}
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("aegis")
    parser.add_argument("llama_server")
    parser.add_argument("gguf")
    parser.add_argument("messages")
    parser.add_argument("--messages", dest="count", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in open(args.messages, encoding="utf-8") if line.strip()][: args.count]

    port = free_port()
    server = subprocess.Popen([args.llama_server, "-m", args.gguf, "--embeddings", "--host", "127.0.0.1", "--port", str(port),
                               "--threads", str(args.threads), "--ctx-size", "8192", "--parallel", "4",
                               "--ubatch-size", "2048", "--batch-size", "2048"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url)
        print("llama.cpp per embedding, one client:", json.dumps(peer_times(url)))
        for extra, label in (([], "local encoder"), (["--encoder-server", url], "encoder server")):
            runs, stored, checked = serve_and_drive(args.aegis, texts, extra, label)
            for run in runs:
                print(json.dumps(run))
            print(f"{label}: {stored} verdicts recorded of {2 * len(texts)} sent; fingerprint check at connect: {checked} ms")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
