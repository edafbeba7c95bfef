"""The ledger tap: records the KV ledger (kv_events), the node's facts (nodes) and, when asked,
request contents (contents) from inside a running serving engine, in the project's input
contract, so that a tap folder plus the gateway's requests.csv is a case folder.

- `recorder`: the engine-side buffer (per-node seq, bounded hand-off, gap markers on drop);
- `writer`: the background thread writing rotating zstd Parquet files;
- `hashing`: the tap's own content identity of token prefixes;
- `vllm_plugin` / `vllm_steps`: the vLLM V1 plugin (entry point `vllm.general_plugins`);
- `sglang_patch` / `sglang_launch`: the SGLang allocator, request-to-token pool and scheduler
  patches, and the launcher behind `kvforensics tap sglang -- …`.

Only the standard library and pyarrow are imported here, so the tap runs inside an engine's
own environment with the project installed without its dependencies."""
