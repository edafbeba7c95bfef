"""`kvforensics probe URL`: send canary-marked probe requests to a live OpenAI-compatible
endpoint and look for one probe's markers in another's response, with a live audit of the
engine's KV pool against its advertised context length (docs/guides/probe.md).

plan.py: what is sent (lengths, markers, order); client.py: HTTP (endpoint facts, streamed
requests); check.py: the findings; stage.py: a run and its result folder."""
