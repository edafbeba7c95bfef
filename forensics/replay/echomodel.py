"""The echo test model: a two-layer Llama whose weights are written down, not trained, so that
greedy decoding copies its context. A response computed over another request's KV carries
that request's tokens, which is what a canary probe (kvforensics probe) looks for.

How it copies (an induction circuit, built by hand; hidden size 256, two attention heads sharing
one KV head of dimension 192, vocabulary 512, MLPs zero):

- each token's embedding is a constant (dimension 0) plus a code of the token: a unit vector in
  56 dimensions (block A), spread apart by a seeded numpy search (largest cosine between two
  codes 0.23);
- layer 0 attends by position: rotary pairs 0-11 of the query and key carry constants
  phased so that head 0 attends to the previous position and head 1 to the one before it
  (a margin of 40 logits over every other position up to 4096), and a key holding the current
  token scores 60 logits lower (so a head never reads its own position where the wanted one
  holds another request's KV); their values are block A, written to blocks B and B2: the
  codes of the two previous tokens;
- layer 1 attends by content alone: rotary pairs 12-95 turn by less than 0.21 rad over 4096
  positions (rope_theta 2.56e34), its query is (2A, B) and its key (B, B2): a position j scores
  highest where the two tokens before it are the current token and the one before it (3
  units), then where the token before it is the current token (2), then where the token two
  before it is the previous one (1), 30 logits a unit, and 60 logits lower where j holds the
  current token itself (so a stub's last position does not copy itself); its value, block A,
  the token at j, is written to block C;
- the output head scores every token by its code's agreement with block C.

So after a token that occurred earlier the model continues with what followed it there, and
once two tokens match it keeps copying. Where nothing matches, the best-scoring position is
still one of the context's, so the next token is a context token and copying starts one or two
steps later. A 1-token stub that attends over another request's pages copies that request's
prompt. Weights are float32 from numpy's default_rng(ECHO_SEED): the same bytes on every
machine; `save_echo_model` writes a Hugging Face folder (config.json, model.safetensors,
3.8 MB) that transformers and vLLM load; it takes some 4 s on one core, so tests build it when they
need it (scripts/build_echo_model.py writes it to a folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

ECHO_SEED = 20261204
VOCAB = 512
HIDDEN = 256
HEAD_DIM = 192
CODE = 56  # code dimensions of a token (blocks A, B, B2, C)
POS_PAIRS = 12  # rotary pairs used for position in layer 0; the rest carry content
ROPE_THETA = 2.56e34
MAX_POSITIONS = 4096
CONST = 8.0  # the constant of dimension 0
BLOCK_A, BLOCK_B, BLOCK_B2, BLOCK_C = (1 + k * CODE for k in range(4))
POSITION_MARGIN = 40.0  # logits between the wanted offset and any other (layer 0)
SELF_PENALTY = 60.0  # logits off a key of the same token (layer 0)
MATCH_LOGITS = 30.0  # logits per unit of match (layer 1)
CURRENT_WEIGHT = 2.0  # units for the current token's match; the previous token's counts 1
OUTPUT_LOGITS = 20.0  # logits of a perfect code match (output head)
INTERMEDIATE = 64

ECHO_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": VOCAB,
    "hidden_size": HIDDEN,
    "intermediate_size": INTERMEDIATE,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": HEAD_DIM,
    "hidden_act": "silu",
    "max_position_embeddings": MAX_POSITIONS,
    "rms_norm_eps": 1e-6,
    "rope_theta": ROPE_THETA,
    "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
    "dtype": "float32",
}


def token_codes(seed: int = ECHO_SEED, rounds: int = 300) -> np.ndarray:
    """VOCAB unit vectors in CODE dimensions, pushed apart: each round moves every code away from
    its most similar other code. Deterministic (numpy, float64, then float32)."""
    rng = np.random.default_rng(seed)
    codes = rng.standard_normal((VOCAB, CODE))
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    for _ in range(rounds):
        sim = codes @ codes.T
        np.fill_diagonal(sim, 0.0)
        nearest = np.argmax(np.abs(sim), axis=1)
        push = sim[np.arange(VOCAB), nearest][:, None] * codes[nearest]
        codes = codes - 0.1 * push
        codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    return codes.astype(np.float32)


def coherence(codes: np.ndarray) -> float:
    """The largest |cosine| between two different tokens' codes."""
    sim = codes.astype(np.float64) @ codes.astype(np.float64).T
    np.fill_diagonal(sim, 0.0)
    return float(np.abs(sim).max())


def inv_freq() -> np.ndarray:
    """The rotary frequencies transformers and vLLM compute for this config (float32)."""
    exponent = np.arange(0, HEAD_DIM, 2, dtype=np.float32) / np.float32(HEAD_DIM)
    return (1.0 / np.power(np.float32(ROPE_THETA), exponent)).astype(np.float32)


def position_scores(offset: int, length: int = MAX_POSITIONS) -> np.ndarray:
    """Layer 0's unscaled score of a key `d` positions back (d = 0 … length-1), head `offset`."""
    theta = inv_freq()[:POS_PAIRS].astype(np.float64)
    d = np.arange(length)[:, None]
    return np.asarray(np.cos((d - offset) * theta).sum(axis=1))


def position_gap(offset: int) -> float:
    """How far the wanted offset's score stands above every other offset's (unscaled)."""
    scores = position_scores(offset)
    return float(scores[offset] - np.delete(scores, offset).max())


def _rotate(x1: float, x2: float, angle: float) -> tuple[float, float]:
    return x1 * np.cos(angle) - x2 * np.sin(angle), x2 * np.cos(angle) + x1 * np.sin(angle)


def _layer0(w: dict[str, np.ndarray], norm: float) -> None:
    """Heads 0 and 1 attend 1 and 2 positions back; values are block A, written to B and B2."""
    half = HEAD_DIM // 2
    theta = inv_freq()
    gap = min(position_gap(1), position_gap(2))
    amplitude = np.sqrt(POSITION_MARGIN / gap * np.sqrt(HEAD_DIM))  # q and k share it
    q, k = w["q"], w["k"]
    for pair in range(POS_PAIRS):
        k[pair, 0] = amplitude / (CONST * norm)
        for head, offset in enumerate((1, 2)):
            # q . R((j - i) theta) k peaks at j - i = -offset when q = R(-offset theta) k
            x1, x2 = _rotate(amplitude, 0.0, -offset * float(theta[pair]))
            q[head * HEAD_DIM + pair, 0] = x1 / (CONST * norm)
            q[head * HEAD_DIM + half + pair, 0] = x2 / (CONST * norm)
    # Never the position itself: a key holding the current token scores SELF_PENALTY lower
    # (content pairs), so where no key sits one or two positions back (a stub over other
    # requests' pages) the heads read some other token, not their own.
    penalty = SELF_PENALTY * np.sqrt(HEAD_DIM)
    own = content_dims(0)
    for i in range(CODE):
        k[own[i], BLOCK_A + i] = 1.0 / norm
        for head in range(2):
            q[head * HEAD_DIM + own[i], BLOCK_A + i] = -penalty / norm
        w["v"][i, BLOCK_A + i] = 1.0 / norm
        w["o"][BLOCK_B + i, i] = 1.0
        w["o"][BLOCK_B2 + i, HEAD_DIM + i] = 1.0


def content_dims(slot: int) -> list[int]:
    """The head dimensions of content slot 0, 1 or 2 (CODE each): the slow rotary pairs'."""
    half = HEAD_DIM // 2
    dims = [*range(POS_PAIRS, half), *range(half + POS_PAIRS, HEAD_DIM)]
    return dims[slot * CODE : (slot + 1) * CODE]


def _layer1(w: dict[str, np.ndarray], norm: float) -> None:
    """Head 0 matches (current, previous) token against (B, B2), never its own position (a key
    holding the current token scores SELF_PENALTY lower), and copies block A into C."""
    beta = MATCH_LOGITS * np.sqrt(HEAD_DIM)
    penalty = SELF_PENALTY * np.sqrt(HEAD_DIM)
    slots = [content_dims(s) for s in range(3)]
    for i in range(CODE):
        cur, prev, own = slots[0][i], slots[1][i], slots[2][i]
        w["q"][cur, BLOCK_A + i] = CURRENT_WEIGHT * beta / norm
        w["q"][prev, BLOCK_B + i] = beta / norm
        w["q"][own, BLOCK_A + i] = -penalty / norm
        w["k"][cur, BLOCK_B + i] = 1.0 / norm
        w["k"][prev, BLOCK_B2 + i] = 1.0 / norm
        w["k"][own, BLOCK_A + i] = 1.0 / norm
        w["v"][i, BLOCK_A + i] = 1.0 / norm
        w["o"][BLOCK_C + i, i] = 1.0


def echo_weights(seed: int = ECHO_SEED) -> dict[str, np.ndarray]:
    """Every parameter of the echo model, by its transformers name, float32."""
    codes = token_codes(seed)
    out: dict[str, np.ndarray] = {}
    embed = np.zeros((VOCAB, HIDDEN), np.float32)
    embed[:, 0] = CONST
    embed[:, BLOCK_A : BLOCK_A + CODE] = codes
    out["model.embed_tokens.weight"] = embed
    head = np.zeros((VOCAB, HIDDEN), np.float32)
    head[:, BLOCK_C : BLOCK_C + CODE] = codes * OUTPUT_LOGITS
    out["lm_head.weight"] = head
    out["model.norm.weight"] = np.ones(HIDDEN, np.float32)
    # RMSNorm divides by the root mean square; these weights undo it: with the norm weight
    # 1/norm the normalised stream is the stream itself (exactly in layer 0, whose input is
    # one code and the constant; within 2% in layer 1, where B and B2 are added).
    norms = (np.sqrt(HIDDEN / (CONST**2 + 1)), np.sqrt(HIDDEN / (CONST**2 + 3)))
    for layer, build in enumerate((_layer0, _layer1)):
        w = {
            "q": np.zeros((2 * HEAD_DIM, HIDDEN), np.float64),
            "k": np.zeros((HEAD_DIM, HIDDEN), np.float64),
            "v": np.zeros((HEAD_DIM, HIDDEN), np.float64),
            "o": np.zeros((HIDDEN, 2 * HEAD_DIM), np.float64),
        }
        build(w, 1.0)
        prefix = f"model.layers.{layer}."
        out[prefix + "input_layernorm.weight"] = np.full(HIDDEN, 1.0 / norms[layer], np.float32)
        out[prefix + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        for name, matrix in w.items():
            out[f"{prefix}self_attn.{name}_proj.weight"] = matrix.astype(np.float32)
        for name, shape in (("gate", (INTERMEDIATE, HIDDEN)), ("up", (INTERMEDIATE, HIDDEN))):
            out[f"{prefix}mlp.{name}_proj.weight"] = np.zeros(shape, np.float32)
        out[prefix + "mlp.down_proj.weight"] = np.zeros((HIDDEN, INTERMEDIATE), np.float32)
    return dict(sorted(out.items()))


def save_echo_model(folder: Path, seed: int = ECHO_SEED) -> Path:
    """Write the echo model as a Hugging Face folder (config.json, generation_config.json,
    model.safetensors); the same bytes every time."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(ECHO_CONFIG, indent=2, sort_keys=True) + "\n")
    generation = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    save_file(echo_weights(seed), str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder
