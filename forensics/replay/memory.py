"""Memory planned before a suspect runs: weights + KV for its context + one chunk's activations,
against the free memory of the device(s) the model sits on (available RAM on a CPU).

A suspect's replay holds at once: the KV its decode read (its context plus the decoded tokens),
and either the KV of the longest writer being rebuilt or the decode cache's copy of the first
(whichever is larger), one more layer's KV while a decode step extends the cache, and one forward
pass's activations. The chunk (tokens per forward pass) is the largest
power of two up to the device's cap that fits; a suspect that does not fit even at one token per
pass is not run, and its reason gives the numbers and what would fit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

GIB = 1 << 30
CHUNK_CAP = {"cuda": 1 << 16, "cpu": 1 << 16}  # tokens per forward pass at most
RESERVE = 0.05  # fraction of the free memory left alone (allocator slack, fragmentation)


@dataclass(frozen=True)
class Shape:
    """What the plan needs to know about a decoder-only model."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    dtype_bytes: int
    weights_bytes: int

    @property
    def kv_per_token(self) -> int:
        """Bytes of KV one token position holds, over all layers."""
        return self.layers * 2 * self.kv_heads * self.head_dim * self.dtype_bytes

    def activations(self, chunk: int, context: int, cpu: bool) -> int:
        """Bytes one forward pass of `chunk` tokens over `context` keys needs beyond the KV."""
        per_token = (12 * self.hidden + 4 * self.intermediate) * self.dtype_bytes
        expanded = 2 * context * self.heads * self.head_dim * self.dtype_bytes  # GQA keys/values
        scores = chunk * context * (self.heads * 4 + 1) if cpu else 0  # CPU masked attention
        decode = 3 * self.heads * context * 4 + self.vocab * 4  # the shares, logits
        return chunk * per_token + expanded + scores + decode


def model_shape(model: Any) -> Shape:
    config = (
        model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    )
    heads = int(config.num_attention_heads)
    hidden = int(config.hidden_size)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    param = next(model.parameters())
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return Shape(
        layers=int(config.num_hidden_layers),
        heads=heads,
        kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
        head_dim=head_dim,
        hidden=hidden,
        intermediate=int(getattr(config, "intermediate_size", None) or 4 * hidden),
        vocab=int(config.vocab_size),
        dtype_bytes=param.element_size(),
        weights_bytes=weights,
    )


@dataclass(frozen=True)
class MemoryPlan:
    fits: bool
    chunk: int  # tokens per forward pass
    kv_bytes: int
    activation_bytes: int
    weights_bytes: int
    free_bytes: int  # free on the device(s) with the weights loaded, less the reserve
    device_bytes: int  # total memory of one device
    device: str

    @property
    def need_bytes(self) -> int:
        return self.kv_bytes + self.activation_bytes

    def reason(self) -> str:
        """Why it does not fit, and what would."""
        total = self.weights_bytes + self.need_bytes
        parts = [
            f"needs {_gib(total)} (weights {_gib(self.weights_bytes)} + KV "
            f"{_gib(self.kv_bytes)} + activations of one {self.chunk}-token chunk "
            f"{_gib(self.activation_bytes)}) but {self.device} has "
            f"{_gib(self.free_bytes)} free beside the weights"
        ]
        if self.device.startswith("cuda") and self.device_bytes:
            gpus = math.ceil(total / (self.device_bytes * (1 - RESERVE)))
            alike = (
                "this GPU with nothing else on it"
                if gpus == 1
                else f"{gpus} GPUs like this one with --device-map auto"
            )
            parts.append(f"would fit: a GPU with at least {_gib(total)} of memory, or {alike}")
        else:
            parts.append(f"would fit: a machine with at least {_gib(total)} of free memory")
        parts.append("the chunk is already the smallest (1 token per pass)")
        return "; ".join(parts)


def plan(
    model: Any, shape: Shape, context: int, writer_tokens: int, n_out: int, free: int | None = None
) -> MemoryPlan:
    """The largest chunk (a power of two up to the device's cap) whose pass fits in memory."""
    device = _device_name(model)
    cpu = device == "cpu"
    available = free_bytes(model) if free is None else free
    keys = context + max(n_out, 1)
    # Held at once: the rebuilt KV the decode reads and either the writer being rebuilt into it
    # or the decode cache's own copy of it (transformers' cache concatenates what it is given),
    # plus one layer's KV while a step extends the cache.
    held = max(keys + writer_tokens, 2 * keys)
    kv = shape.kv_per_token * held + shape.kv_per_token * keys // shape.layers
    span = max(keys, writer_tokens)
    chunk = CHUNK_CAP["cpu" if cpu else "cuda"]
    while chunk > 1 and kv + shape.activations(chunk, span, cpu) > available:
        chunk //= 2
    act = shape.activations(chunk, span, cpu)
    return MemoryPlan(
        kv + act <= available,
        chunk,
        kv,
        act,
        shape.weights_bytes,
        available,
        total_bytes(model),
        device,
    )


def free_bytes(model: Any) -> int:
    """Free memory of the devices the model's weights are on (RAM available on a CPU),
    counting memory PyTorch holds cached but unused, less the reserve."""
    devices = sorted({p.device for p in model.parameters()}, key=str)
    free = 0
    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            unused, _ = torch.cuda.mem_get_info(device)
            cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
            free += unused + cached
        else:
            free += available_ram()
    return int(free * (1 - RESERVE))


def total_bytes(model: Any) -> int:
    device = next(model.parameters()).device
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return 0


def available_ram() -> int:
    """MemAvailable from /proc/meminfo (Linux), else the physical memory."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    import os

    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _device_name(model: Any) -> str:
    devices = sorted({str(p.device) for p in model.parameters()})
    return devices[0] if len(devices) == 1 else f"{len(devices)} devices ({', '.join(devices)})"


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"
