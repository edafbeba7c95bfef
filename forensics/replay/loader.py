"""Loading the replay model, and the identity a replay run records for it.

`--model` takes 'test' (the project's test model), a local Hugging Face model folder
(config.json and weights), or an org/name that is already in the local Hugging Face cache
(resolved offline: replay never downloads). The identity (folder, SHA-256 of config.json and of
every weight file, dtype) goes into `replay_runs`, with the served-model name the run stands for:
`--served-model NAME` when given, else the org/name, else the test model's name, else the
folder's name. Only runs whose served-model name is the model the request log names for a
suspect raise that suspect's confidence."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.errors import UsageError
from forensics.replay.testmodel import (
    TEST_CONFIG,
    TEST_MODEL,
    TEST_MODEL_NAME,
    build_test_model,
    exact_float32,
    resolve_device,
)

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
CACHE_LAYOUT = re.compile(r"models--([^/]+?)--([^/]+)/snapshots/[^/]+/?$")


@dataclass
class ModelIdentity:
    spec: str  # as given to --model
    path: str  # the folder loaded ('' for the built-in test model)
    served_model: str  # the name the request log would give this model
    config_sha256: str
    weight_files: list[str] = field(default_factory=list)
    weight_sha256: list[str] = field(default_factory=list)
    dtype: str = ""
    served_explicit: bool = False  # the served-model name came from --served-model


@dataclass
class LoadedModel:
    model: Any
    identity: ModelIdentity
    device: str


def load(
    spec: str, device: str = "auto", device_map: str | None = None, served_model: str | None = None
) -> LoadedModel:
    """Load the model named by `spec` on `device` (or spread by `device_map='auto'`)."""
    resolved = resolve_device(device)
    if spec == TEST_MODEL:
        exact_float32(resolved)
        model = build_test_model(resolved)
        identity = _test_identity(model)
    else:
        folder, hub_name = resolve_folder(spec)
        model = _load_folder(folder, resolved, device_map)
        identity = folder_identity(spec, folder, hub_name or folder.name)
    identity.dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    if served_model:
        identity.served_model = served_model
        identity.served_explicit = True
    devices = sorted({str(p.device) for p in model.parameters()})
    return LoadedModel(model, identity, ",".join(devices) if device_map else resolved)


def identify(spec: str, served_model: str | None = None) -> ModelIdentity:
    """What `load` would record of the model named by `spec`, without loading it (the test
    model is built on the CPU to hash its weights)."""
    if spec == TEST_MODEL:
        identity = _test_identity(build_test_model("cpu"))
    else:
        folder, hub_name = resolve_folder(spec)
        identity = folder_identity(spec, folder, hub_name or folder.name)
    if served_model:
        identity.served_model = served_model
        identity.served_explicit = True
    return identity


def load_model(spec: str, device: str = "auto", device_map: str | None = None) -> Any:
    """'test' -> the test model; otherwise a local model folder or an org/name in the local
    Hugging Face cache. Never downloads."""
    return load(spec, device, device_map).model


def load_test_model(device: str = "cpu") -> Any:
    """The test model on `device` ('auto', 'cpu' or 'cuda'), as `load_model('test', device)`."""
    return load_model(TEST_MODEL, device)


def resolve_folder(spec: str) -> tuple[Path, str | None]:
    """(model folder, org/name when known) for a folder or an org/name in the local cache."""
    path = Path(spec).expanduser()
    if path.is_dir():
        found = CACHE_LAYOUT.search(path.resolve().as_posix())
        return path, (f"{found.group(1)}/{found.group(2)}" if found else None)
    if HUB_ID.fullmatch(spec):
        return Path(_from_cache(spec)), spec
    raise UsageError(
        f"--model {spec}: no model folder there. Pass a local Hugging Face model "
        "folder (with config.json and the weights), an org/name already in the "
        "local Hugging Face cache, or 'test'"
    )


def _from_cache(repo_id: str) -> str:
    try:
        from huggingface_hub import snapshot_download

        return str(
            snapshot_download(
                repo_id, local_files_only=True, cache_dir=os.environ.get("HF_HUB_CACHE") or None
            )
        )
    except Exception as exc:  # the hub library raises several kinds for "not cached"
        raise UsageError(
            f"--model {repo_id}: not in the local Hugging Face cache, and replay never "
            "downloads. Fetch it on a machine with network access (huggingface-cli download "
            f"{repo_id}), copy the folder here and pass it: --model /path/to/model-folder "
            f"({type(exc).__name__})"
        ) from exc


def _load_folder(path: Path, device: str, device_map: str | None) -> Any:
    from transformers import AutoModelForCausalLM

    from forensics.replay import attention

    if not (path / "config.json").is_file():
        raise UsageError(
            f"{path}: not a model folder (no config.json); pass a local "
            "Hugging Face causal-LM folder, an org/name in the local cache, or "
            "'test'"
        )
    attention.register()
    kwargs: dict[str, Any] = {"attn_implementation": attention.FAST, **_dtype_kwarg()}
    if device_map:
        kwargs["device_map"] = _device_map(device_map)
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot load the model: {exc}") from exc
    return (model if device_map else model.to(device)).eval()


def _device_map(value: str) -> str:
    from importlib.util import find_spec

    if value != "auto":
        raise UsageError(f"--device-map {value}: only 'auto' is supported")
    if find_spec("accelerate") is None:
        raise UsageError("--device-map auto needs accelerate: pip install 'kvforensics[replay]'")
    return value


def _dtype_kwarg() -> dict[str, str]:
    """The model's own dtype: transformers 5 calls the option `dtype`, 4.x `torch_dtype`."""
    import inspect

    from transformers import PreTrainedModel

    params = inspect.signature(PreTrainedModel.from_pretrained).parameters
    return {"dtype": "auto"} if "dtype" in params else {"torch_dtype": "auto"}


def folder_identity(spec: str, folder: Path, served: str) -> ModelIdentity:
    """SHA-256 of config.json and of each weight file (sorted by name)."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    return ModelIdentity(
        spec,
        str(folder.resolve()),
        served,
        file_sha256(folder / "config.json"),
        [p.name for p in files],
        [file_sha256(p) for p in files],
    )


def _test_identity(model: Any) -> ModelIdentity:
    """The test model has no files: its config and its float32 weights (sorted by name) are
    hashed instead."""
    config = hashlib.sha256(json.dumps(TEST_CONFIG, sort_keys=True).encode()).hexdigest()
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().float().cpu().numpy().astype("<f4").tobytes())
    return ModelIdentity(
        TEST_MODEL, "", TEST_MODEL_NAME, config, ["(generated)"], [digest.hexdigest()]
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
