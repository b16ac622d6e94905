"""Writes Gemma 3's SentencePiece model (`tokenizer.model`) rebuilt from a Gemma 3 GGUF's vocabulary.

EmbeddingGemma's folder as this project caches it has `tokenizer.json` but not `tokenizer.model`,
which llama.cpp's converter reads for a Gemma 3 vocabulary. Every Gemma 3 model shares one
vocabulary, and a GGUF keeps each piece with its score and type (GGUF's token types number
SentencePiece's piece types), so the default model's GGUF holds everything the converter reads.
The pieces are checked against `tokenizer.json` first.

Beside it goes the `tokenizer_config.json` the converter reads for which added tokens are control
tokens and which are plain (user-defined: the whitespace runs, `<mask>`, the unused slots), from
`tokenizer.json`'s own list; without it those would be written as normal pieces and llama.cpp
would split runs of spaces differently from every other Gemma 3 GGUF.

    python gguf_vocab_to_spm.py GEMMA3.gguf TOKENIZER_JSON OUT/tokenizer.model
"""
import os
import json
import sys

import gguf
from sentencepiece import sentencepiece_model_pb2 as pb


def main(gguf_path: str, tokenizer_json: str, out_path: str) -> None:
    reader = gguf.GGUFReader(gguf_path)

    def array(name):
        field = reader.fields[name]
        return [field.parts[i] for i in field.data]

    def scalar(name):
        field = reader.fields[name]
        return int(field.parts[field.data[0]][0])

    in_gguf = [bytes(p).decode("utf-8") for p in array("tokenizer.ggml.tokens")]
    with open(tokenizer_json, encoding="utf-8") as f:
        described = json.load(f)
    vocab = described["model"]["vocab"]
    by_id = {i: p for p, i in vocab.items()}
    # The GGUF keeps SentencePiece's own spelling: the whitespace-run pieces are plain spaces
    # there, which tokenizer.json writes escaped as U+2581; they compare after unescaping.
    if len(vocab) != len(in_gguf) or any(
        by_id.get(i) is None or g not in (by_id[i], by_id[i].replace("\u2581", " "))
        for i, g in enumerate(in_gguf)
    ):
        sys.exit(f"{gguf_path}'s vocabulary is not {tokenizer_json}'s")
    pieces = in_gguf

    model = pb.ModelProto()
    for text, score, kind in zip(pieces, array("tokenizer.ggml.scores"), array("tokenizer.ggml.token_type")):
        piece = model.pieces.add()
        piece.piece = text
        piece.score = float(score[0])
        piece.type = int(kind[0])
    spec = model.trainer_spec
    spec.model_type = pb.TrainerSpec.BPE
    spec.vocab_size = len(pieces)
    spec.byte_fallback = True
    spec.unk_id = scalar("tokenizer.ggml.unknown_token_id")
    spec.bos_id = scalar("tokenizer.ggml.bos_token_id")
    spec.eos_id = scalar("tokenizer.ggml.eos_token_id")
    spec.pad_id = scalar("tokenizer.ggml.padding_token_id")
    # Gemma 3 keeps whitespace as written: no dummy prefix, no collapsing, spaces as U+2581.
    norm = model.normalizer_spec
    norm.name = "identity"
    norm.add_dummy_prefix = False
    norm.remove_extra_whitespaces = False
    norm.escape_whitespaces = True
    with open(out_path, "wb") as f:
        f.write(model.SerializeToString())

    config = {
        "unk_token": by_id[spec.unk_id],
        "added_tokens_decoder": {
            str(t["id"]): {"content": t["content"], "special": t["special"]}
            for t in described["added_tokens"]
        },
    }
    config_path = os.path.join(os.path.dirname(out_path), "tokenizer_config.json")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)


if __name__ == "__main__":
    main(*sys.argv[1:4])
