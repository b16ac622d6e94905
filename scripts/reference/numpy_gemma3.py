"""A float64 Gemma 3 forward pass in NumPy on a GGUF file's dequantized weights.

Slow and simple on purpose: it is the precision oracle for our engine. llama.cpp checks that we
read the file and the architecture the way an independent implementation does; this checks that
our arithmetic is exact up to float32 rounding, which llama.cpp's 8-bit activations cannot.
"""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class Gemma3:
    def __init__(self, path):
        r = GGUFReader(path)
        self.t = {}
        for t in r.tensors:
            w = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.t[t.name] = w.reshape([int(d) for d in reversed(t.shape)]) if w.ndim > 1 else w
        f = {k: r.fields[k].contents() for k in r.fields if k.startswith("gemma3.")}
        self.hidden = f["gemma3.embedding_length"]
        self.layers = f["gemma3.block_count"]
        self.heads = f["gemma3.attention.head_count"]
        self.kv_heads = f["gemma3.attention.head_count_kv"]
        self.head_dim = f["gemma3.attention.key_length"]
        self.eps = f["gemma3.attention.layer_norm_rms_epsilon"]
        self.window = f["gemma3.attention.sliding_window"]
        self.base_global = f["gemma3.rope.freq_base"]

    def norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, base):  # x: [heads, T, D], rotate-half
        T, D = x.shape[1], x.shape[2]
        inv = base ** (-np.arange(0, D, 2) / D)
        ang = np.arange(T)[:, None] * inv[None, :]
        cos, sin = np.cos(ang), np.sin(ang)
        a, b = x[..., : D // 2], x[..., D // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)

    def forward(self, ids):
        T = len(ids)
        x = self.t["token_embd.weight"][ids] * np.sqrt(self.hidden)
        for i in range(self.layers):
            p = lambda n: self.t[f"blk.{i}.{n}.weight"]
            sliding = (i + 1) % 6 != 0
            h = self.norm(x, p("attn_norm"))
            q = (h @ p("attn_q").T).reshape(T, self.heads, self.head_dim).transpose(1, 0, 2)
            k = (h @ p("attn_k").T).reshape(T, self.kv_heads, self.head_dim).transpose(1, 0, 2)
            v = (h @ p("attn_v").T).reshape(T, self.kv_heads, self.head_dim).transpose(1, 0, 2)
            base = 10000.0 if sliding else self.base_global
            q = self.rope(self.norm(q, p("attn_q_norm")), base)
            k = self.rope(self.norm(k, p("attn_k_norm")), base)
            rep = self.heads // self.kv_heads
            k, v = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(self.head_dim)
            pos = np.arange(T)
            allowed = pos[None, :] <= pos[:, None]
            if sliding:
                allowed &= (pos[:, None] - pos[None, :]) < self.window
            s = np.where(allowed[None], s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = (s @ v).transpose(1, 0, 2).reshape(T, -1) @ p("attn_output").T
            x = x + self.norm(o, p("post_attention_norm"))
            h = self.norm(x, p("ffn_norm"))
            g = h @ p("ffn_gate").T
            g = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
            f = (g * (h @ p("ffn_up").T)) @ p("ffn_down").T
            x = x + self.norm(f, p("post_ffw_norm"))
        x = self.norm(x, self.t["output_norm.weight"])
        return x[-1] @ self.t["token_embd.weight"].T
