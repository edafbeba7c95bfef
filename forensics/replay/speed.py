"""Replay speed against the model's own prefill speed, measured in one run on one device.

For each context length n: a stub suspect whose decode read n positions of KV written by
`leakers` earlier requests (each n / leakers tokens, placed at the suspect's positions with their
own rotation, as the incident's freed pages were), and whose billed prompt is n random tokens.
Its delivered output is first decoded from that KV (untimed), so that the timed replay has a real
verdict to reach. Then, on the same model:

- plain prefill: one forward pass of n tokens with transformers' own SDPA attention and no KV
  kept, the fastest the model itself goes (the limit);
- replay: the suspect through the replay path (memory plan, writers' KV, clean prefill of its
  prompt, both decodes), tokens run through the model per second.

The ratio replay / plain is what the replay path costs over the model's own speed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
import torch

from forensics.replay import SpeedOptions, attention, memory
from forensics.replay.decode import WriterStore, decode_with_evidence, prefill_first_token
from forensics.replay.judge import response_sha256
from forensics.replay.ledger import SuspectPlan
from forensics.replay.replay import is_out_of_memory, run_planned
from forensics.replay.testmodel import resolve_device
from forensics.replay.verdicts import Verdict

# A Llama shape of about 1.2 B parameters (16 layers, hidden 2048, GQA 32/8 heads).
RANDOM_SHAPES: dict[str, dict[str, Any]] = {
    "random-1b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
    },
    "random-tiny": {
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
    },
}

LOGIT_SPREAD = 8.0


@dataclass
class SpeedRow:
    context: int
    leakers: int
    prefill_tokens_per_s: float | None
    replay_tokens_per_s: float | None
    replay_tokens: int
    replay_seconds: float
    verdict: Verdict
    reason: str
    peak_gib: float | None
    prefill_attention: str = "sdpa"  # the attention the plain prefill ran with

    @property
    def ratio(self) -> float | None:
        if not self.prefill_tokens_per_s or not self.replay_tokens_per_s:
            return None
        return self.replay_tokens_per_s / self.prefill_tokens_per_s


def random_llama(name: str, device: str, dtype: torch.dtype, max_positions: int) -> Any:
    """A Llama with random weights made directly on `device` (nothing is downloaded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    options: dict[str, Any] = {**RANDOM_SHAPES[name], "rope_theta": 500000.0}
    config = LlamaConfig(
        **options,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    previous = torch.get_default_dtype()
    torch.manual_seed(0)
    try:
        torch.set_default_dtype(dtype)
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():
        # Random weights give almost flat logits, where 16-bit rounding alone decides the
        # greedy choice; a larger final norm spreads them, as a trained model's are.
        model.model.norm.weight.fill_(LOGIT_SPREAD)
    return attention.use(model.eval(), attention.FAST)


def speed_model(
    name: str,
    device: str,
    dtype: str | None = None,
    max_positions: int = 1 << 20,
    device_map: str | None = None,
) -> Any:
    """The model a speed run measures: random-1b / random-tiny made on `device` in `dtype`
    (default bfloat16 on CUDA, float32 on a CPU), else what `--model` loads ('test' or a model
    folder, in its own dtype)."""
    from forensics.replay.loader import load_model

    if name not in RANDOM_SHAPES:
        return attention.use(load_model(name, device, device_map), attention.FAST)
    default = torch.bfloat16 if device.startswith("cuda") else torch.float32
    chosen = getattr(torch, dtype) if dtype else default
    if not isinstance(chosen, torch.dtype) or not chosen.is_floating_point:
        from forensics.errors import UsageError

        raise UsageError(f"--dtype {dtype}: use bfloat16, float16 or float32")
    return random_llama(name, device, chosen, max_positions)


def describe(model: Any, name: str, n_out: int) -> str:
    """The title line of a speed table: model, size, dtype, device and replay's kernel."""
    param = next(model.parameters())
    device = str(param.device)
    kernel = attention.kernel_name(device, param.dtype)
    params = sum(p.numel() for p in model.parameters())
    if param.device.type == "cuda":
        where = f"{device} ({torch.cuda.get_device_name(param.device)})"
    else:
        where = f"cpu ({torch.get_num_threads()} threads)"
    return (
        f"replay speed: {name} ({params / 1e9:.2f} B parameters, "
        f"{str(param.dtype).removeprefix('torch.')}) on {where}, "
        f"replay attention {kernel}, {n_out} output tokens"
    )


def stub_suspect(
    model: Any, context: int, leakers: int, n_out: int, vocab: int, seed: int = 7
) -> SuspectPlan:
    """The suspect described above, with its delivered output decoded from the leaked KV (the
    writers run in the chunks the memory plan allows, not token by token)."""
    rng = np.random.default_rng(seed)
    size = -(-context // leakers)
    writers = {f"L{j:03d}": rng.integers(0, vocab, size).tolist() for j in range(leakers)}
    slots: list[tuple[str, int] | None] = [("R", 0)]
    slots += [(f"L{p // size:03d}", p % size) for p in range(1, context)]
    stub = [int(rng.integers(0, vocab))]
    writers["R"] = stub + [0] * (context - 1)
    chunk = memory.plan(model, memory.model_shape(model), context, size, n_out).chunk
    first = prefill_first_token(model, stub)
    delivered = decode_with_evidence(model, writers, slots, first, n_out, chunk=chunk).tokens
    prompt = rng.integers(0, vocab, context).tolist()
    return SuspectPlan(
        "R", "bench", prompt, stub, n_out, delivered, response_sha256(delivered), slots, writers
    )


def plain_prefill(model: Any, context: int, vocab: int) -> tuple[float | None, str]:
    """(tokens/s, attention) of one forward pass over `context` tokens with no KV kept:
    transformers' own SDPA attention, or, if that runs out of memory, the same pass with
    replay's fast attention (plain causal SDPA, never a mask); None when neither fits."""
    device = next(model.parameters()).device
    ids = torch.randint(
        0,
        vocab,
        (1, context),
        device=device,
        generator=torch.Generator(device=device).manual_seed(1),
    )
    for kind in ("sdpa", attention.FAST):
        model.set_attn_implementation(kind)
        try:
            with torch.inference_mode():
                _sync(device)
                started = time.perf_counter()
                model(input_ids=ids, use_cache=False, logits_to_keep=1)
                _sync(device)
                return context / (time.perf_counter() - started), kind
        except (MemoryError, RuntimeError) as exc:  # CUDA's OOM, or cuBLAS's "out of memory"
            if not is_out_of_memory(exc):
                raise
            continue
        finally:
            model.set_attn_implementation(attention.FAST)
            _empty(device)
    return None, "out of memory"


def measure(
    model: Any,
    context: int,
    leakers: int,
    n_out: int = 16,
    repeat: int = 1,
    note: Callable[[str], None] | None = None,
) -> SpeedRow:
    """One row: plain prefill and replay of one stub suspect at `context` (the best of
    `repeat` runs of each, for a machine shared with other work). `note` hears each phase as it
    ends (with its seconds), so that a run cut short still shows how far it went."""
    device = next(model.parameters()).device
    vocab = int(model.config.vocab_size)
    say = note or (lambda _line: None)
    clock = time.perf_counter()
    plan = stub_suspect(model, context, leakers, n_out, vocab)
    say(f"{context:,} tokens: stub suspect decoded ({time.perf_counter() - clock:.1f} s)")
    _empty(device)
    runs = [plain_prefill(model, context, vocab) for _ in range(max(1, repeat))]
    prefill = max((r for r, _ in runs if r is not None), default=None)
    how = runs[-1][1]
    say(f"{context:,} tokens: plain prefill {_num(prefill)} tokens/s ({how})")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = float("inf")
    for _ in range(max(1, repeat)):
        _sync(device)
        started = time.perf_counter()
        result = run_planned(model, plan, WriterStore())
        _sync(device)
        seconds = min(seconds, time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated(device) / (1 << 30) if device.type == "cuda" else None
    _empty(device)
    rate = result.tokens / seconds if result.tokens else None
    return SpeedRow(
        context,
        leakers,
        prefill,
        rate,
        result.tokens,
        seconds,
        result.verdict,
        result.reason,
        peak,
        how,
    )


def run_rows(
    model: Any,
    contexts: list[int],
    leakers: list[int],
    n_out: int,
    repeat: int,
    out: TextIO,
    notes: TextIO,
) -> list[SpeedRow]:
    """Warm up, then measure each context in turn: its row goes to `out` (after the table's
    head) as soon as it is done, the phases within a row to `notes`."""
    warm_up(model)
    print(HEAD, file=out, flush=True)
    rows = []
    for context, n in zip(contexts, leakers, strict=True):
        rows.append(measure(model, context, n, n_out, repeat, lambda line: _note(line, notes)))
        print(row_line(rows[-1]), file=out, flush=True)
    return rows


def run(
    options: SpeedOptions,
    device: str,
    out: TextIO,
    notes: TextIO,
    dtype: str | None = None,
    device_map: str | None = None,
    repeat: int = 1,
) -> list[SpeedRow]:
    """Build the model on `device` ('auto', 'cpu' or 'cuda'), print the table's title to
    `out`, then its rows as they are measured (run_rows)."""
    contexts = options.context_list()
    leakers = options.leaker_list()
    resolved = resolve_device(device)
    model = speed_model(options.model, resolved, dtype, max(contexts) + 64, device_map)
    print(describe(model, options.model, options.output_tokens), file=out, flush=True)
    return run_rows(model, contexts, leakers, options.output_tokens, repeat, out, notes)


def as_json(row: SpeedRow) -> dict[str, Any]:
    """A row for --json output (rates rounded to tokens/s, ratio to 3 places)."""
    return {
        "context": row.context,
        "leakers": row.leakers,
        "prefill_tokens_per_s": _rounded(row.prefill_tokens_per_s, 0),
        "replay_tokens_per_s": _rounded(row.replay_tokens_per_s, 0),
        "ratio": _rounded(row.ratio, 3),
        "replay_tokens": row.replay_tokens,
        "replay_seconds": round(row.replay_seconds, 3),
        "peak_gib": _rounded(row.peak_gib, 2),
        "verdict": row.verdict,
        "reason": row.reason,
        "prefill_attention": row.prefill_attention,
    }


def _rounded(value: float | None, places: int) -> float | None:
    return None if value is None else round(value, places)


def _note(line: str, notes: TextIO) -> None:
    print(f"  [{line}]", file=notes, flush=True)


def warm_up(model: Any) -> None:
    """Kernels and allocator warmed on a short run, so the first row is not charged for them."""
    measure(model, 256, 1, 2)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _empty(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


HEAD = (
    f"{'context':>10} {'leakers':>7} {'prefill tok/s':>14} {'replay tok/s':>13} "
    f"{'ratio':>6} {'replay s':>9} {'peak GiB':>9}  verdict"
)


def table(rows: list[SpeedRow], title: str) -> str:
    """The rows as a fixed-width text table."""
    return "\n".join([title, HEAD, *(row_line(r) for r in rows)])


def row_line(r: SpeedRow) -> str:
    """One row of the table."""
    return (
        f"{r.context:>10,} {r.leakers:>7} {_num(r.prefill_tokens_per_s):>14} "
        f"{_num(r.replay_tokens_per_s):>13} "
        f"{(f'{r.ratio:.2f}' if r.ratio is not None else '-'):>6} {r.replay_seconds:>9.2f} "
        f"{(f'{r.peak_gib:.1f}' if r.peak_gib is not None else '-'):>9}  {r.verdict}"
        + ("" if r.verdict == Verdict.CONFIRMED else f" ({r.reason})")
        + ("" if r.prefill_attention == "sdpa" else f" [plain prefill: {r.prefill_attention}]")
    )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"
