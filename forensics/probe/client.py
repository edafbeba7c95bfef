"""HTTP to an OpenAI-compatible endpoint, standard library only: what it says about itself
(/v1/models; vLLM's /metrics, SGLang's /get_server_info) and one streamed probe request, timed
to its first token."""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from forensics.errors import KvfError
from forensics.probe.plan import Api, Endpoint, Probe

_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_MOST_BYTES = 64 << 20  # the largest answer read


class EndpointError(KvfError):
    """The endpoint cannot be used: unreachable, or not OpenAI-compatible (exit 2)."""


@dataclass
class Outcome:
    """What came back for one probe (no content is kept beyond the check)."""

    index: int
    status: int = 0  # HTTP status; 0 when no answer came
    error: str | None = None
    received_at: float | None = None  # when the request was sent
    first_token_at: float | None = None
    completed_at: float | None = None
    response_id: str | None = None
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    sent_tokens: int | None = None  # prompt tokens sent (token prompts)

    @property
    def ttft_s(self) -> float | None:
        if self.first_token_at is None or self.received_at is None:
            return None
        return self.first_token_at - self.received_at


def base_url(url: str) -> str:
    """The server's root: scheme://host:port[/prefix], without a trailing /v1."""
    parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise EndpointError(f"'{url}' is not an http(s) URL; give e.g. http://127.0.0.1:8000")
    path = parsed.path.rstrip("/")
    path = path[:-3] if path.endswith("/v1") else path
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    parsed = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
    return cls(parsed.netloc, timeout=timeout), parsed.path


def _headers(api_key: str | None, request_id: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if request_id:
        headers["X-Request-Id"] = request_id
    return headers


def _unreachable(url: str, exc: BaseException) -> EndpointError:
    why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return EndpointError(
        f"cannot reach {url} ({why}); fix: start the server, or give the URL it listens on "
        "(e.g. http://127.0.0.1:8000)"
    )


def get(url: str, path: str, api_key: str | None, timeout: float) -> tuple[int, bytes]:
    """GET path; (status, body). Connection failures raise EndpointError."""
    conn, prefix = _connection(url, timeout)
    try:
        conn.request("GET", prefix + path, headers=_headers(api_key))
        response = conn.getresponse()
        return response.status, response.read(_MOST_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise _unreachable(url, exc) from None
    finally:
        conn.close()


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def discover(
    url: str, api_key: str | None, model: str | None, timeout: float
) -> tuple[Endpoint, list[str]]:
    """The endpoint's model, advertised context length and, where the engine publishes them,
    its KV pool and page size; with notes on what could not be read."""
    notes: list[str] = []
    status, body = get(url, "/v1/models", api_key, timeout)
    if status in (401, 403):
        raise EndpointError(
            f"{url}/v1/models refused the request (HTTP {status}); fix: give the API key with "
            "--api-key-env NAME (the environment variable that holds it)"
        )
    listed = _json(body) if status == 200 else None
    models = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(models, list) or not models:
        raise EndpointError(
            f"{url}/v1/models gave HTTP {status} and no model list; fix: give the URL of an "
            "OpenAI-compatible server (vLLM, SGLang)"
        )
    chosen = next((m for m in models if isinstance(m, dict) and m.get("id") == model), None)
    if model and chosen is None:
        names = ", ".join(str(m.get("id")) for m in models if isinstance(m, dict))
        raise EndpointError(f"{url} does not serve the model '{model}'; it serves: {names}")
    chosen = chosen or models[0]
    context = _int(chosen.get("max_model_len"))
    pool, page, engine, source = _vllm_pool(url, api_key, timeout, notes)
    if engine is None:
        pool, page, engine, source, context = _sglang_pool(url, api_key, timeout, context)
    if engine is None:
        notes.append("the engine publishes no KV pool size (/metrics, /get_server_info)")
    end = Endpoint(url, str(chosen.get("id")), context, pool, page, engine, source)
    return end, notes


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and int(value) > 0 else None
    except (TypeError, ValueError):
        return None


def _vllm_pool(
    url: str, api_key: str | None, timeout: float, notes: list[str]
) -> tuple[int | None, int | None, str | None, str]:
    status, body = get(url, "/metrics", api_key, timeout)
    found = _CACHE_INFO.search(body.decode("utf-8", "replace")) if status == 200 else None
    if found is None:
        return None, None, None, ""
    labels = dict(_LABEL.findall(found.group("labels")))
    blocks, size = _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
    if blocks is None or size is None:
        notes.append("vllm:cache_config_info gives no num_gpu_blocks or block_size")
        return None, size, "vllm", "/metrics vllm:cache_config_info"
    return blocks * size, size, "vllm", "/metrics vllm:cache_config_info"


def _sglang_pool(
    url: str, api_key: str | None, timeout: float, context: int | None
) -> tuple[int | None, int | None, str | None, str, int | None]:
    status, body = get(url, "/get_server_info", api_key, timeout)
    info = _json(body) if status == 200 else None
    if not isinstance(info, dict) or "max_total_num_tokens" not in info:
        return None, None, None, "", context
    context = context or _int(info.get("context_length"))
    pool, page = _int(info.get("max_total_num_tokens")), _int(info.get("page_size")) or 1
    return pool, page, "sglang", "/get_server_info max_total_num_tokens", context


def request_body(endpoint: Endpoint, api: Api, probe: Probe, prompt: list[int] | str) -> dict:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": probe.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if api == Api.CHAT:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if endpoint.engine == "vllm":
        body["return_token_ids"] = True  # vLLM: the generated token ids in every chunk
    return body


def send(
    endpoint: Endpoint,
    api: Api,
    probe: Probe,
    prompt: list[int] | str,
    api_key: str | None,
    timeout: float,
) -> Outcome:
    """One streamed request; the time of its first generated token, its tokens and usage."""
    path = "/v1/chat/completions" if api == Api.CHAT else "/v1/completions"
    out = Outcome(probe.index, sent_tokens=len(prompt) if isinstance(prompt, list) else None)
    conn, prefix = _connection(endpoint.url, timeout)
    payload = json.dumps(request_body(endpoint, api, probe, prompt)).encode()
    try:
        out.received_at = time.time()
        conn.request("POST", prefix + path, payload, _headers(api_key, probe.request_id))
        response = conn.getresponse()
        out.status = response.status
        if response.status != 200:
            out.error = f"HTTP {response.status}: {_reason(response.read(4096))}"
        else:
            _read_stream(response, out)
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        out.error = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
    finally:
        out.completed_at = time.time()
        conn.close()
    return out


def _reason(body: bytes) -> str:
    """The server's error message (never the prompt: only its 'message' field, cut short)."""
    found = _json(body)
    message = found.get("message") if isinstance(found, dict) else None
    if message is None and isinstance(found, dict) and isinstance(found.get("error"), dict):
        message = found["error"].get("message")
    return str(message or "")[:200]


def _read_stream(response: http.client.HTTPResponse, out: Outcome) -> None:
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = _json(data.encode())
        if not isinstance(chunk, dict):
            continue
        out.response_id = out.response_id or chunk.get("id")
        for choice in chunk.get("choices") or []:
            ids = [int(t) for t in choice.get("token_ids") or []]
            text = choice.get("text") or (choice.get("delta") or {}).get("content") or ""
            if (ids or text) and out.first_token_at is None:
                out.first_token_at = time.time()
            out.token_ids.extend(ids)
            out.text += text
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.prompt_tokens = _count(usage.get("prompt_tokens"))
            out.completion_tokens = _count(usage.get("completion_tokens"))
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                out.cached_tokens = _count(details.get("cached_tokens"))


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and value >= 0 else None
