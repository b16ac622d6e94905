#!/usr/bin/env bash
# Retrains the shipped heads in prompt_guard/heads/ from the permissive training data there, and
# sets each validator's threshold to the highest recall that flags at most 1% of the benign rows
# on out-of-fold scores: the issue's budget of 4% of benign messages flagged by any validator,
# shared by the four (at 1.5% each the four together flagged 4.8% of the held-out benign rows;
# at 1% they flag 3.5%; README, "Benign budget").
# Every choice (regularisation, layers, threshold) is made on folds that hold out whole sources
# (`--validation by-source`, the default): a user's traffic comes from sources no head saw, and
# random folds, which put one source on both sides of a split, overstate what it will see. The
# report prints the held-out-source figure first and the random-fold one beside it, then what each
# source's rows score at the chosen threshold.
# The benign budget is held on real messages people sent to assistants (benign-real.jsonl) and
# authored benign traffic; benign-holdout.jsonl and benign-real-holdout.jsonl are never trained on.
# The shipped heads read EmbeddingGemma-300M (prompt_guard/heads/*.json): on held-out sources it
# beats the 270M's hidden states on every validator (README, "Why the shipped heads read
# EmbeddingGemma"), and each reads its sentence embedding: the mean of its residual stream after
# layer 12 (half the work) won on held-out sources for spam and toxic but lost where it matters,
# on the dev set's unseen Indonesian tweets (toxic) and on customer-service messages with an order
# number and a link (spam); harassment and financial advice lost on held-out sources (README,
# "Which layer of the encoder, and which head"; `aegis train --layers 12,embedding` compares).
# `scripts/train-heads.sh --encoder decoder` retrains the 270M's heads instead
# (prompt_guard/heads/decoder/, each with the threshold tuned with it); layers 6, 8 and 11 are
# their candidates, the issue-17 measurement having found the middle layers best.
# Give validator names to retrain only those (two at a time fit the 2-core machine).
# Deterministic: the same model, data and CPU kernel kind give the same files, bit for bit; other
# kinds (AMX tiles, AVX-512 BF16, AVX2) differ in the features' last bits and so in the heads
# (each file's training.features_arithmetic names its kind; heads README, "Retrained on another
# CPU"). Compare a candidate with the heads retrained on the same machine.
set -euo pipefail
# AMX tiles are left out of training, so an Intel Xeon and an AMD EPYC (Zen 4 and 5), both with
# AVX-512 BF16, learn the same files from the same data; AMX only sped up the feature pass, and
# the guard still reads on AMX at run time.
export AEGIS_CPU_KERNELS_OFF="${AEGIS_CPU_KERNELS_OFF:+$AEGIS_CPU_KERNELS_OFF,}amx-bf16"
cd "$(dirname "$0")/.."
scripts/setup-model.sh >/dev/null
scripts/setup-encoder.sh >/dev/null
# On the encoder the embedding is the one candidate; on the model, layers 6, 8 and 11.
layers=embedding
case " $* --encoder=${AEGIS_ENCODER:-} " in
  *" --encoder decoder "* | *" --encoder=decoder "*) layers=6,8,11 ;;
esac
# Toxic keeps a second map for contempt without a rude word (README, "Contempt without a rude
# word"): trained on its own rows, so the insults' map is the one the rows above draw, and on the
# mean after the encoder's layer 16, which read contempt's turns better than the embedding on
# every held-back file pooled (README, "A fifth round").
named=$(printf '%s\n' "$@" | grep -cxE 'spam|toxic|harassment|financial_advice' || true)
readings=()
if [ "$layers" = embedding ] && { [ "$named" = 0 ] || printf '%s\n' "$@" | grep -qx toxic; }; then
  # Its own line at 0.2% of the benign rows: at the default 0.3% its third round of rows
  # (README) flagged 2.1% of benign-real-holdout.jsonl by any validator, over the 2% the issue
  # allows.
  readings=(--reading toxic:contempt=prompt_guard/heads/authored-contempt.jsonl --reading-budget 0.002
    --reading-layers 16)
fi
# authored-writers-harassment.jsonl (three English writers' contempt and civil criticism, session
# 56) labels harassment alone: toxic trained on it ranked the English public sources lower
# (README, on authored-writers-harassment.jsonl).
# authored-writers.jsonl (eleven helper writers' reports, untargeted profanity, civil criticism,
# contempt, direct abuse, threats and their look-alikes) labels only toxic and harassment (its
# threats harassment alone), so the other heads train as before (README, "Eight writers").
# Diluted rows (scripts/make-diluted-rows.py, made here from the files below, not committed): each
# toxic row, and as many toxic-false ones, with an ordinary sentence of the training files' benign
# rows beside it, so a friendly sentence after an insult does not carry it through (README,
# "Insults with text beside them"). Toxic was trained with them in session 64; spam, harassment
# and financial advice were trained before they existed, and their next retrain reads them.
diluted_dir=$(mktemp -d)
trap 'rm -rf "$diluted_dir"' EXIT
python3 scripts/make-diluted-rows.py "$diluted_dir/authored-diluted.jsonl"
# Features from the precise encoder (bf16 kernels), not the int8 one `auto` picks where the CPU
# has VNNI: the shipped heads do not depend on int8's rounding, and scored on it they were
# measured unchanged (README, "The encoder in int8").
# Toxic and harassment read through a hidden layer beside the line (README, "A hidden layer"):
# contempt said politely and a swear at the traffic sit on the same side of any one line.
hidden=()
if [ "$layers" = embedding ]; then
  for key in toxic harassment; do
    if [ "$named" = 0 ] || printf '%s\n' "$@" | grep -qx "$key"; then
      hidden+=(--hidden "$key:64")
    fi
  done
fi
# AEGIS_TRAIN_FEATURES=lab builds the research flags in (`--scores-out`, for
# scripts/research/baseline-auc.sh).
features=()
[ -z "${AEGIS_TRAIN_FEATURES:-}" ] || features=(--features "$AEGIS_TRAIN_FEATURES")
cargo run --release --locked -p aegis-cli ${features[@]+"${features[@]}"} -- train \
    --model default \
    --encoder-weights precise \
    --prompts prompt_guard \
    --data prompt_guard/heads/dev-permissive.jsonl \
    --data prompt_guard/heads/train-1.jsonl \
    --data prompt_guard/heads/train-2.jsonl \
    --data prompt_guard/heads/authored.jsonl \
    --data prompt_guard/heads/authored-benign.jsonl \
    --data prompt_guard/heads/benign-real.jsonl \
    --data prompt_guard/heads/authored-writers.jsonl \
    --data prompt_guard/heads/authored-writers-harassment.jsonl \
    --data "$diluted_dir/authored-diluted.jsonl" \
    --layers "$layers" \
    --tune-thresholds \
    --benign-budget 0.01 \
    "${readings[@]}" \
    "${hidden[@]}" \
    "$@"
