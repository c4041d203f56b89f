"""Each context-parallel rank's attention kernels under the causal load balance (docs/model.md, 'Training step:
each context-parallel rank's attention calls').

The sequence of s tokens is cut into 2·cp chunks of c = s/(2·cp) and rank i holds chunks i and 2cp−1−i (Llama 3,
arXiv:2407.21783, §3.3.2; Megatron-Core / Transformer Engine's load-balanced context parallelism), so every rank
has the same causal work, 2·cp·c² query-key pairs. What differs is the shape of the kernels that do it:

- all-gather (Llama 3): after gathering K/V each rank attends its two query chunks over their causal prefixes,
  chunk k (c queries) over keys 0 .. (k+1)·c, causal with the mask aligned bottom-right: two calls,
  (c, (i+1)·c) and (c, (2cp−i)·c).
- ring (Transformer Engine's p2p pass-KV): step 0 is the rank's own two chunks, one causal (2c, 2c) call; at each
  of the cp−1 later steps the KV of rank j arrives: j < i, both query chunks over j's first chunk, a full (2c, c);
  j > i, the second query chunk over both of j's chunks, a full (c, 2c). Rank i runs i of the first kind and
  cp−1−i of the second.

A non-causal attention (no load balance needed) runs its s/cp queries over all s keys: one (s/cp, s) call
all-gathered, cp calls of (s/cp, s/cp) on a ring. The layer waits for the slowest rank (the next collective
joins them), so the step takes the rank whose calls cost most.
"""

from __future__ import annotations

from typing import Any

Call = tuple[dict[str, Any], int]  # an attention op and how many times the rank runs it


def _shape(op: dict[str, Any], seq_q: int, seq_kv: int, causal: bool) -> dict[str, Any]:
    return {**op, "seq_q": seq_q, "seq_kv": seq_kv, "causal": causal}


def rank_calls(op: dict[str, Any], cp: int, allgather: bool) -> list[list[Call]]:
    """Per rank, the attention calls one layer's ``op`` (the probe's: s/cp queries and keys) becomes under
    context parallelism of degree ``cp``; [[(op, 1)]] when cp is 1 or the op is not a plain attention."""
    local = int(op.get("seq_q", 0))
    if cp <= 1 or op.get("kind") != "attention" or local != int(op.get("seq_kv", -1)) or local % 2:
        return [[(op, 1)]]
    s = local * cp
    if not op.get("causal"):
        return [[(_shape(op, local, s, False), 1)] if allgather else [(_shape(op, local, local, False), cp)]]
    c = local // 2
    if allgather:
        return [[(_shape(op, c, (i + 1) * c, True), 1), (_shape(op, c, (2 * cp - i) * c, True), 1)]
                for i in range(cp)]
    diagonal = _shape(op, local, local, True)
    earlier, later = _shape(op, local, c, False), _shape(op, c, local, False)
    return [[(diagonal, 1), *([(earlier, i)] if i else []), *([(later, cp - 1 - i)] if cp - 1 - i else [])]
            for i in range(cp)]
