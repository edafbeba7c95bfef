"""Screening from the gateway log and node facts, for periods and nodes without a ledger.

A request is a *possible receiver* when (queries/analysis/screening.sql):

- over-pool: it was answered 200 although prompt_tokens exceeds pool_slots of its serving
  prefill node (such a prompt cannot have been prefilled: the incident's signature);
- fast-ttft: its time to first token is implausibly short for its prompt. Per prefill node, the
  normal prefill rate is the median of log(prompt_tokens / ttft) over normal requests (status
  200, ttft > 0, prompt_tokens >= min_prompt, not over-pool); expected ttft = prompt_tokens /
  that rate. A request is flagged when ttft < expected / factor, factor = max(ttft_factor,
  exp(mad_k * 1.4826 * MAD of the log rates)); nodes with fewer than min_normal normal
  requests give no verdict; a request computing fewer than min_prompt tokens gets none either
  (fixed costs and the gateway's timing noise, not its prompt, decide its time to first
  token). Defaults: ttft_factor 10, mad_k 4, min_prompt 256, min_normal 5. A request counts
  as looked at by this signal only where its stub would stand out: the 95th percentile of the
  node's short prompts' times less their computing (at least min_normal of them) is below its
  flagging time. Where it would not, the request is flagged only if its time less its
  computing is also below what the gateway's noise leaves those short prompts (their 1st
  percentile less the spread from it to their median), else noise alone flags it;
- cache-implausible: the response reports more prompt tokens served from the prefix cache
  (cached_tokens) than a cache can serve: all of the prompt, not whole pages, more than any
  earlier request on the node held, or all but the last token and more than any earlier
  request of its account was served (a stub whose uncomputed prompt the engine counts as
  cached);
- engine-rejected: the engine logged exceeds-max-tokens or input-too-long for it (the log
  adapters' engine_evidence table), yet the gateway answered 200; kv-checksum-mismatch and
  kv-canary-violation evidence also make it a suspect;
- token-shortfall: the prefill node's own prompt-token counters (SGLang's prefill batch lines,
  engine_counters) fall short of what the gateway billed for the requests prefilled in the same
  window, beyond what the requests flagged as stubs by another reason explain (each counted as
  computing 1 token): every other request of that window may be the stub
  (queries/analysis/token_shortfall.sql says how requests are matched to windows by time).

Every other request on the same decode node that could have written the pages the suspect
read is a *possible leaker* (queries/analysis/possible_exposures.sql): received before the
suspect ended and since the node's pool was made (its latest start), however long ago, since
freed pages keep their data; `window_s` (default 600 s) only ranks them (basis: concurrent,
window, earlier). A suspect whose row names no node has every request as a possible leaker,
and a request without one is a possible leaker of every suspect (unless the gateway refused
it). Where a complete ledger covers the suspect's decode node over the suspect's
whole activity, the ledger decides: the suspect keeps its screening row (corroboration), gets
no possible pairs, and a suspect the ledger shows reading nothing foreign is recorded in
cleared_findings. A hole in the ledger (ledger_holes) leaves the requests it meets uncovered.

A stub's blocks are cached under its prompt's hashes though it wrote none of its prompt: a
later request on its node with a prefix-cache hit may be served them and read the stub's
leakers' data. Such requests are possible receivers of the stub's possible leakers
(queries/analysis/possible_cache_hits.sql says which requests; a rebuild clears none of them).
"""

from __future__ import annotations

from dataclasses import asdict

import duckdb

from forensics.analysis.fetch import make_ledger_nodes
from forensics.analysis.reasons import STUB_REASONS, SUSPECT_REASONS
from forensics.casedb.sql import one_row, run_script, sql, tables
from forensics.ledger.external import is_url
from forensics.ledger.store import ledger_meta
from forensics.options import ScreeningParams

__all__ = ["STUB_REASONS", "SUSPECT_REASONS", "ScreeningParams", "screen"]


def screen(
    con: duckdb.DuckDBPyConnection, params: ScreeningParams, ledger_scanned: bool = False
) -> None:
    """Write screening and possible_exposures. ledger_scanned: the analysis has just made
    temp.analysis_ledger_nodes and temp.analysis_request_nodes (its sweep's pass over the
    ledger); otherwise they are made here."""
    if not ledger_scanned:
        make_ledger_nodes(con, "analysis/ledger_nodes_pass")
        run_script(con, sql("analysis/request_nodes"))
    if "engine_evidence" not in tables(con):
        run_script(con, sql("analysis/engine_evidence_empty"))  # a case database without logs
    if "engine_counters" not in tables(con):
        run_script(con, sql("analysis/engine_counters_empty"))  # made before the counters
    bound = {
        **asdict(params),
        "suspect_reasons": list(SUSPECT_REASONS),
        "stub_reasons": list(STUB_REASONS),
    }
    meta = ledger_meta(con)
    external = meta is not None
    remote = meta is not None and is_url(str(meta.get("location", "")))
    run_script(con, sql("analysis/ledger_holes_remote" if remote else "analysis/ledger_holes"))
    if "tap_reports" in tables(con) and con.execute(sql("analysis/tap_reported")).fetchall():
        run_script(con, sql("analysis/ledger_holes_tap"))
    for name in SCREENING_QUERIES:
        run_script(con, sql(name), {**bound, "external": external, "remote": remote})
        if name == SECOND_READERS:
            _second_reads(con, params.second_read_pairs)


def _second_reads(con: duckdb.DuckDBPyConnection, most: int) -> None:
    """The second readers' pairs with their stubs' leakers into possible_exposures: one by one
    while they number at most `most`, condensed to what the lists need beyond (queries/analysis/
    cache_hits_full.sql, cache_hits_condensed.sql)."""
    row = one_row(con.execute(sql("analysis/cache_hit_pairs")))
    pairs = int(row[0]) if row else 0
    run_script(
        con, sql("analysis/cache_hits_full" if pairs <= most else "analysis/cache_hits_condensed")
    )
    run_script(con, sql("analysis/cache_hits_insert"))


# In order: the suspects and how the ledger covers them, the engines' token counters against
# the billed tokens (after the other reasons: a flagged stub counts as 1 token), what positive
# evidence cleared, the possible pairs of what is left, the requests that may have read a stub's
# pages through the prefix cache, and the evidence each node was judged on.
SECOND_READERS = "analysis/possible_cache_hits"  # then their pairs (_second_reads)
SCREENING_QUERIES = (
    "analysis/screening",
    "analysis/token_shortfall",
    "analysis/cleared_findings",
    "analysis/possible_exposures",
    SECOND_READERS,
    "analysis/node_evidence",
)
