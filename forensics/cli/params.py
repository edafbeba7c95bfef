"""Every option and argument of every command, declared once.

Each is an `Annotated` alias carrying its flag, help text and (for fixed choices) its enum; a
command names the alias as its parameter's type and takes the default from the library's typed
options (forensics.options, forensics.bench.run), so a default is written once, where the
library defines it. Two commands that take the same option use the same alias; the few flags
that mean something different in different commands are listed in PER_COMMAND with the reason
(tests/cli/test_cli_params.py checks both).

`--ray` and `--ledger-external` may be given without a value (see forensics.cli.ray_option)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.ray_option import LEDGER_HELP, RAY_HELP
from forensics.errors import UsageError
from forensics.options import (
    Allocator,
    Bug,
    Device,
    Engine,
    FreeList,
    Mix,
    OutputModel,
    SimAllocator,
    SimSampling,
    check_number,
)
from forensics.probe.plan import Api

# Flags whose meaning differs between commands, each command with its own alias below.
PER_COMMAND = {
    "--model": "simulate: what makes the simulated outputs; replay: the model replayed with; "
    "bench --replay: the model timed (random weights allowed); probe: the served model's name",
    "--allocator": "simulate: the simulator's page pool; reconstruct: also auto, per node",
    "--seed": "bench keeps its own seed so that its figures compare from run to run",
}

_MODEL_HELP = (
    "a local Hugging Face causal-LM folder, an org/name already in the local Hugging Face "
    "cache (never downloaded), or 'test' for the project's test model (default: 'test' when "
    "the case was served by it)."
)
_DEVICE_HELP = "auto (CUDA when present), cpu or cuda."
_SERVED_HELP = (
    "The request log's name for the replay model, when it differs from the org/name or folder "
    "name; only runs with the logged model raise confidence."
)


def checked(flag: str) -> Callable[[float | None], float | None]:
    """The option's callback: its value checked against forensics.options.LIMITS (exit 2 with
    the range when it is not finite or out of range), before the command runs."""

    def check(value: float | None) -> float | None:
        if value is not None:
            try:
                check_number(flag, value)
            except UsageError as exc:
                raise typer.BadParameter(str(exc)) from None
        return value

    return check


# --- the case, the database, the output ------------------------------------------------------
CaseDir = Annotated[Path, typer.Argument(help="Case folder with requests, kv_events, nodes, ...")]
Db = Annotated[
    Path,
    typer.Option(
        "--db",
        help="Case database (DuckDB): `kvforensics ingest` creates or refreshes it; the other "
        "commands read it and add their tables.",
    ),
]
Out = Annotated[
    Path,
    typer.Option(
        "--out",
        help="Output folder (created if missing) for report.html, timeline.csv and "
        "notifications/; investigate adds the case database and manifest.json; probe writes "
        "result.json, requests.csv, accounts.csv, probe.html and manifest.json.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]

# --- reading the case --------------------------------------------------------------------------
AssumeUtc = Annotated[
    bool,
    typer.Option(
        "--assume-utc",
        help="Read timestamps without an offset as UTC instead of quarantining them.",
    ),
]
FollowLinks = Annotated[
    bool,
    typer.Option(
        "--follow-links",
        help="Read symbolic links in the case folder that lead outside it (by default they "
        "are skipped and listed).",
    ),
]
Ray = Annotated[str | None, typer.Option("--ray", help=RAY_HELP, metavar="[ADDRESS]")]
LedgerExternal = Annotated[
    str | None, typer.Option("--ledger-external", help=LEDGER_HELP, metavar="[LOCATION]")
]
LedgerLoad = Annotated[
    bool,
    typer.Option(
        "--ledger-load",
        help="Load the KV ledger into the case database, where a Parquet ledger in node=NAME/ "
        "folders would be read in place by default (the case database then stands alone, "
        "without its case folder; loading takes longer). CSV and JSONL ledgers always load.",
    ),
]

# --- notification -----------------------------------------------------------------------------
AwareAt = Annotated[
    str | None,
    typer.Option(
        "--aware-at",
        help="When the operator became aware of the incident (ISO-8601 with offset); sets "
        "notify_by.",
    ),
]
Rules = Annotated[
    Path | None,
    typer.Option(
        "--rules",
        help="CSV of notification deadline rules that replace or add to the shipped ones "
        "(header: jurisdiction,notify_within_hours,authority_within_hours,basis).",
    ),
]

Templates = Annotated[
    Path | None,
    typer.Option(
        "--templates",
        help="Folder of notice templates (notice_receiving.md/.html, notice_leaking.md/.html, "
        "and partials such as _notice_base.html): a file found there replaces the package's of "
        "the same name. Each must still show every field the package's template shows, or the "
        "command stops (exit 2) naming the file and the field.",
    ),
]

# --- scope -------------------------------------------------------------------------------------
SCOPE_RULE = (
    "An exposure is in scope when its receiving read (the first read of the pair's KV by the "
    "receiving request; for screening's possible pairs, the receiving request's arrival) is at "
    "or after --since and before --until, and, with --account, when its receiving or its "
    "leaking request belongs to one of the accounts given."
)
Since = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Cover only exposures whose receiving read is at or after TIME (ISO-8601 with an "
        "offset, or integer epoch microseconds, as ingest reads them). " + SCOPE_RULE,
        metavar="TIME",
    ),
]
Until = Annotated[
    str | None,
    typer.Option(
        "--until",
        help="Cover only exposures whose receiving read is before TIME (as --since).",
        metavar="TIME",
    ),
]
Account = Annotated[
    list[str] | None,
    typer.Option(
        "--account",
        help="Cover only exposures whose receiving or leaking request belongs to account ID "
        "(repeatable: any of them).",
        metavar="ID",
    ),
]

# --- analysis ----------------------------------------------------------------------------------
WindowS = Annotated[
    float,
    typer.Option(
        "--window-s",
        callback=checked("--window-s"),
        help="Screening: seconds before a suspect in which requests on the same decode node "
        "are possible leakers.",
    ),
]
TtftFactor = Annotated[
    float,
    typer.Option(
        "--ttft-factor",
        callback=checked("--ttft-factor"),
        help="Flag a time to first token this many times shorter than the normal prefill rate "
        "predicts (screening: the node's; probe: the median of the long probes').",
    ),
]
Workers = Annotated[
    int, typer.Option("--workers", callback=checked("--workers"), help="Nodes swept in parallel.")
]

# --- replay ------------------------------------------------------------------------------------
ReplayModel = Annotated[
    str | None, typer.Option("--replay-model", help="Model for replay: " + _MODEL_HELP)
]
ReplayDevice = Annotated[Device, typer.Option("--replay-device", help=_DEVICE_HELP)]
ServedModel = Annotated[str | None, typer.Option("--served-model", help=_SERVED_HELP)]
Model = Annotated[str | None, typer.Option("--model", help="The model: " + _MODEL_HELP)]
ReplayOn = Annotated[Device, typer.Option("--device", help=_DEVICE_HELP)]
DeviceMap = Annotated[
    str | None,
    typer.Option(
        "--device-map",
        help="auto: spread the model over every visible GPU (needs accelerate, part of the "
        "replay extra).",
    ),
]
Request = Annotated[
    list[str] | None,
    typer.Option(
        "--request",
        help="Replay only this request id (repeatable; default: every suspect in exposures "
        "and screening).",
    ),
]

# --- reconstruct -------------------------------------------------------------------------------
ReconstructAllocator = Annotated[
    Allocator,
    typer.Option(
        "--allocator",
        help="Allocator to drive: auto (from each node's engine: SGLang's or vLLM's real "
        "class, the LIFO model when unknown), sglang, vllm or lifo.",
    ),
]
Orders = Annotated[
    int,
    typer.Option(
        "--orders",
        callback=checked("--orders"),
        help="Where a node's runs over every order the timestamps leave open grow past its "
        "limit, the orders sampled for the reads after that point (the logged one and shuffles; "
        "the order that takes each group's frees first is run besides).",
    ),
]
SkewMs = Annotated[
    float,
    typer.Option(
        "--skew-ms",
        callback=checked("--skew-ms"),
        help="Operations closer than this (clock resolution and skew between the gateway and "
        "the nodes) are not ordered by their timestamps.",
    ),
]
SglangFreeList = Annotated[
    FreeList,
    typer.Option(
        "--sglang-free-list",
        help="Where an SGLang node's allocator puts freed pages back, which no request log "
        "shows. Default version: every way the node's page size allows is followed, and the "
        "lists take the way the SGLang release its nodes table or start-up log names builds for "
        "its role (before 0.4.9.post4 front or back, then staged, from 0.5.0rc2 staged only on "
        "a disaggregated node); a pair only the other ways' runs have is kept apart "
        "(reconstructed_other_ways, and the report), unless replay confirms it; a node that "
        "names no release, or whose log that way fits worse than another, is listed over "
        "every way. any: every way's reads listed. staged (merged back sorted when the free "
        "list runs short), front (the most recently freed handed out first) or back (the "
        "least recently freed first, a page size of 1): only that way followed.",
    ),
]
DeliveryJitterMs = Annotated[
    float | None,
    typer.Option(
        "--delivery-jitter-ms",
        callback=checked("--delivery-jitter-ms"),
        help="The most one engine step's outputs can be logged apart by the gateway (its "
        "delivery jitter). Where the logged times do not mark a vLLM node's steps (a gateway "
        "in front of the engine's server), the node is rebuilt under this bound; without it "
        "such a node clears nobody. Measure it, do not guess: a bound below the truth can "
        "clear a true leaker.",
    ),
]
ReplayBudget = Annotated[
    int,
    typer.Option(
        "--replay-budget",
        callback=checked("--replay-budget"),
        help="Layouts replayed per stub receiver, most frequent first.",
    ),
]

# --- simulate ----------------------------------------------------------------------------------
SimOut = Annotated[
    Path,
    typer.Argument(help="Case folder to create (replaced if it is a simulated case folder)."),
]
Requests = Annotated[
    int,
    typer.Option(
        "--requests", callback=checked("--requests"), help="Number of requests to simulate."
    ),
]
SimSeed = Annotated[
    int,
    typer.Option(
        "--seed",
        callback=checked("--seed"),
        help="Random seed; the same seed gives the same files.",
    ),
]
Scale = Annotated[
    float,
    typer.Option(
        "--scale",
        callback=checked("--scale"),
        help="Shrink every size (context, pools, lengths) by this factor, e.g. 0.001 for a "
        "small sample.",
    ),
]
Bugs = Annotated[
    list[Bug] | None,
    typer.Option(
        "--bug",
        help="Engine bug to switch on (repeatable), or none. Default: oversize-stub (the "
        "incident).",
    ),
]
FixedAt = Annotated[
    str | None,
    typer.Option(
        "--fixed-at",
        help="ISO-8601 time (with offset) after which over-long prompts are refused with HTTP 400.",
    ),
]
Days = Annotated[
    float,
    typer.Option(
        "--days", callback=checked("--days"), help="Length of the traffic window in days."
    ),
]
NoTruth = Annotated[
    bool,
    typer.Option(
        "--no-truth",
        help="Skip the truth tables and the read sweep (also skips contents.jsonl and response "
        "hashes); ground_truth/summary.json still records the run.",
    ),
]
NoContents = Annotated[bool, typer.Option("--no-contents", help="Do not write contents.jsonl.")]
SimModel = Annotated[
    OutputModel,
    typer.Option(
        "--model",
        help="Output model: synthetic (hash-based) or test (the replay test model).",
    ),
]
SimSample = Annotated[
    SimSampling,
    typer.Option(
        "--sampling",
        help="mixed: each request gets sampling settings (most a temperature of 0.7 to 1.0 "
        "with top-p 0.9 to 1.0, a fifth greedy), written to requests.csv (temperature, top_p, "
        "top_k, seed) and used by --model test; greedy: every request greedy, no such columns.",
    ),
]
PromptWords = Annotated[
    int,
    typer.Option(
        "--prompt-words",
        callback=checked("--prompt-words"),
        help="Draw each prompt (and shared prefix) from this many token ids of its own, as text "
        "repeats its words (0: uniformly from the vocabulary). With --model test and sampled "
        "outputs, about 12 gives replay evidence to weigh: the random-weight test model tells "
        "uniformly random contexts apart only weakly.",
    ),
]
SimPool = Annotated[
    SimAllocator,
    typer.Option(
        "--allocator",
        help="Page reuse: lifo (the simulator's own last-in-first-out pool), sglang (SGLang's "
        "real PagedTokenToKVPoolAllocator) or vllm (vLLM's real BlockPool); the last two run "
        "in the engines' environment (scripts/engines_venv.sh).",
    ),
]

# --- bench -------------------------------------------------------------------------------------
Events = Annotated[
    int,
    typer.Option("--events", callback=checked("--events"), help="About how many ledger events."),
]
BenchMix = Annotated[
    Mix,
    typer.Option(
        "--mix",
        help="short: chat prompts; long: long-context traffic with requests up to a million "
        "slots; both: a ledger of each, their analyses timed alternately, and the long mix's "
        "analysis cost per event over the short mix's.",
    ),
]
Repeat = Annotated[
    int,
    typer.Option(
        "--repeat",
        callback=checked("--repeat"),
        help="Time the analysis and the scan floor this many times each, alternating, each in "
        "a fresh process; the figures are the median runs (every run is in --json's runs_s).",
    ),
]
BenchSeed = Annotated[
    int, typer.Option("--seed", callback=checked("--seed"), help="Simulator seed.")
]
MemoryLimit = Annotated[
    str | None,
    typer.Option("--memory-limit", help="DuckDB memory limit for ingest and analysis, e.g. 2GB."),
]
Workdir = Annotated[
    Path | None,
    typer.Option(
        "--workdir", help="Where to write the ledger (default: the system's temporary folder)."
    ),
]
Keep = Annotated[bool, typer.Option("--keep", help="Keep the ledger and case database.")]
Naive = Annotated[
    bool,
    typer.Option(
        "--naive/--no-naive",
        help="Also run the naive per-slot approach where it fits in a few minutes.",
    ),
]
WriteFloor = Annotated[
    bool,
    typer.Option(
        "--write-floor",
        help="Also time the write floor: the ledger's Parquet parts written as they are into a "
        "new database file in the case database's storage format (no checks).",
    ),
]
BenchReplay = Annotated[
    bool,
    typer.Option(
        "--replay",
        help="Time replay instead: per context, the model's own prefill tokens/s, the replay "
        "tokens/s of one stub suspect that read other requests' KV over that context, their "
        "ratio and the verdict (needs the replay extra; the options below apply).",
    ),
]
SpeedModel = Annotated[
    str,
    typer.Option(
        "--model",
        help="With --replay: random-1b or random-tiny (a Llama shape with random weights made "
        "on the device, bfloat16 on CUDA), 'test', or a local model folder.",
    ),
]
Contexts = Annotated[
    str,
    typer.Option("--contexts", help="With --replay: context lengths in tokens, e.g. 8192,131072."),
]
Leakers = Annotated[
    str,
    typer.Option(
        "--leakers",
        help="With --replay: per context, how many earlier requests wrote the KV the suspect "
        "read (the last one repeats).",
    ),
]

# --- audit-logs, tap, verify -------------------------------------------------------------------
LogPaths = Annotated[
    list[Path],
    typer.Argument(help="SGLang or vLLM log files (plain, .gz or .zst) or folders of them."),
]
NodeMap = Annotated[
    Path | None,
    typer.Option(
        "--node-map",
        help="CSV with header node,file_glob naming the node of each file (default: the node "
        "is taken from the file name).",
    ),
]
TapEngine = Annotated[Engine, typer.Argument(help="The serving engine: sglang or vllm.")]
TapDir = Annotated[Path, typer.Option("--dir", help="Folder the ledger is written to.")]
TapNode = Annotated[
    str | None,
    typer.Option("--node", help="Node name in the ledger (default: host:port of the server)."),
]
TapContents = Annotated[
    bool,
    typer.Option("--contents", help="Also record prompt and output token ids (for replay)."),
]
VerifyOut = Annotated[Path, typer.Argument(help="Output folder written by investigate.")]
MovedCase = Annotated[
    Path | None,
    typer.Option(
        "--case",
        help="The case folder, where it has moved since the run (default: the folder the "
        "manifest names).",
    ),
]
PubKey = Annotated[
    Path | None,
    typer.Option(
        "--pubkey",
        help="The examiner's Ed25519 public key (PEM or an OpenSSH line): check "
        "manifest.json.sig with it; a missing or wrong signature is a difference (exit 1).",
    ),
]

# --- chain of custody (investigate) -----------------------------------------------------------
Examiner = Annotated[
    str | None,
    typer.Option(
        "--examiner",
        help="Who runs the analysis, recorded in the manifest and the report (default: "
        "$KVFORENSICS_EXAMINER).",
    ),
]
CaseRef = Annotated[
    str | None,
    typer.Option(
        "--case-ref",
        help="The case or ticket reference, recorded in the manifest and the report (default: "
        "$KVFORENSICS_CASE_REF).",
    ),
]
SignKey = Annotated[
    Path | None,
    typer.Option(
        "--sign-key",
        help="The examiner's Ed25519 private key (PEM or OpenSSH; a passphrase from "
        "$KVFORENSICS_KEY_PASSPHRASE): sign manifest.json into manifest.json.sig and record "
        "the key's fingerprint.",
    ),
]

# explain
RequestId = Annotated[str, typer.Argument(help="The request id, as the request log has it.")]
Html = Annotated[
    Path | None,
    typer.Option("--html", help="Also write the story as a self-contained HTML page to FILE."),
]

# --- probe -------------------------------------------------------------------------------------
ProbeUrl = Annotated[
    str, typer.Argument(help="The endpoint's root URL, e.g. http://127.0.0.1:8000 (a /v1 is cut).")
]
ProbeApi = Annotated[
    Api,
    typer.Option(
        "--api",
        help="tokens: /v1/completions with token-id prompts; text: /v1/completions with text; "
        "chat: /v1/chat/completions.",
    ),
]
ProbeModel = Annotated[
    str | None,
    typer.Option("--model", help="The served model's name (default: the first /v1/models lists)."),
]
ApiKeyEnv = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        help="The environment variable that holds the API key (sent as a Bearer token; never "
        "printed or written).",
    ),
]
MaxRequests = Annotated[
    int,
    typer.Option(
        "--max-requests", callback=checked("--max-requests"), help="Probe requests sent, at most."
    ),
]
MaxTokens = Annotated[
    int,
    typer.Option(
        "--max-tokens", callback=checked("--max-tokens"), help="Tokens asked of each probe."
    ),
]
Concurrency = Annotated[
    int,
    typer.Option(
        "--concurrency",
        callback=checked("--concurrency"),
        help="Requests in flight at once (0: enough long probes to need more than the KV pool).",
    ),
]
ContextLen = Annotated[
    int,
    typer.Option(
        "--context-len",
        callback=checked("--context-len"),
        help="The context length to plan for (0: the endpoint's /v1/models max_model_len).",
    ),
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        callback=checked("--timeout"),
        help="Seconds for the whole run; requests not started by then are not sent.",
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Ask the endpoint what it is, print the plan (requests, lengths, concurrency, "
        "what is looked for) and send nothing.",
    ),
]
