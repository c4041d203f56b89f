"""Published end-to-end training throughputs and the model's prediction of each.

Each run gives its model, device, device count, global batch, sequence length and the layout the
authors report, with the pipeline schedule it states (interleaved 1F1B, with its chunk count v where
given); what they do not report (micro-batch size, v, or whether they interleaved at all) is searched
(v over ``search.virtual_stage_candidates``) and the fastest layout that fits is taken, as the authors
tuned theirs. The predicted achieved TFLOP/s
per device is the source's own FLOP count (its convention, ``flops``) over the predicted step time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from perfmodel.dtypes import DType
from perfmodel.graph.llm_config import LlmConfig, bundled
from perfmodel.hardware import Hardware
from perfmodel.roofline import resolve_hardware
from perfmodel.training import flops
from perfmodel.training.layout import RECOMPUTE_MODES, AttentionKernel, GradAccumulation, TrainingSetup
from perfmodel.training.search import SearchResult, SearchSpace, search_layouts, virtual_stage_candidates

Convention = Literal["megatron", "model", "palm"]
MEGATRON_2021 = ("Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
                 "Megatron-LM', arXiv:2104.04473 (https://arxiv.org/abs/2104.04473), Table 1 (A100 80GB, Selene; "
                 "checked against the paper's text)")
KORTHIKANTI_2022 = ("Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer Models', "
                    "arXiv:2205.05198 (https://arxiv.org/abs/2205.05198), Tables 3 and 5 and §6 (MFU x 312 TFLOP/s "
                    "A100 bf16 peak; checked against the paper's text)")
KORTHIKANTI_2022_DP8 = ("Korthikanti et al. 2022, arXiv:2205.05198 (https://arxiv.org/abs/2205.05198), abstract "
                        "and §6.3: the 530B run scaled to dp = 8 (2240 A100s, global batch 8 x 280), MFU 54.2 % "
                        "with sequence parallelism and selective recomputation (39.15 s per step), 42.1 % with full "
                        "recomputation (checked against the paper's text)")
LLAMA3_2024 = ("Llama Team 2024, 'The Llama 3 Herd of Models', arXiv:2407.21783 (https://arxiv.org/abs/2407.21783), "
               "Table 4 (H100 80GB, BF16; checked against the paper's text)")
A100 = "nvidia-a100-sxm4-80gb"
H100 = "nvidia-h100-sxm5-80gb"


@dataclass(frozen=True)
class PublishedRun:
    """One published training run: model, layout, batch, and the TFLOP/s per device it achieved."""

    name: str
    source: str
    convention: Convention
    hardware: str
    devices: int
    tp: int
    pp: int
    cp: int
    global_batch: int
    seq_len: int
    published_tflops: float
    recompute: tuple[str, ...]  # what the source used, or the modes to search where it does not say
    zero: int
    model: str | dict[str, Any]
    sequence_parallel: bool = False
    dropout: bool = True
    flash_attention: bool = False
    grad_bytes: float = 4.0
    micro_batch: tuple[int, ...] = (1, 2, 4, 8)
    virtual_stages: tuple[int, ...] | None = None  # the chunk count the source states; None: searched
    interleaved: bool = False  # the source states the interleaved schedule (v > 1 wherever pp > 1)
    cp_allgather: bool = False  # context parallelism all-gathers K/V before the attention (not a ring)
    ends_in_split: bool = False  # the source gives the embedding and the loss a layer's slot in the pipeline split
    slot_chunks: bool = False  # the source's first chunk holds only the embedding: one slot per chunk, v = slots/pp
    grad_accumulation: GradAccumulation = "fused"  # weight gradients accumulate in the GEMM or in a kernel of their own
    pods: tuple[int, float] | None = None  # devices per full-bisection pod and the taper above the pods
    published_mfu: float | None = None  # the MFU the source prints beside its TFLOP/s (rounded to 1 %), if any
    attention_kernel: AttentionKernel = "native"  # the flash attention of the run's time (``attention_kernel``)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def config(self) -> LlmConfig:
        return bundled(self.model) if isinstance(self.model, str) else LlmConfig.from_hf(self.model, self.name)


def _gpt(heads: int, hidden: int, layers: int) -> dict[str, Any]:
    """Megatron's GPT: 4h MLP, vocabulary 51,200, sequence 2048 (Narayanan et al. 2021, §5.1)."""
    return {"model_type": "gpt2", "n_embd": hidden, "n_head": heads, "n_layer": layers, "n_inner": 4 * hidden,
            "vocab_size": 51200, "n_positions": 2048}


_MEGATRON = (  # name, heads, hidden, layers, tp, pp, GPUs, batch, achieved TFLOP/s per GPU: MEGATRON_2021, Table 1
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137.0),  # Table 1 row 1 (44 % of peak, 4.4 PFLOP/s in all)
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138.0),  # row 2 (44 %, 8.8 PFLOP/s)
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142.0),  # row 3 (46 %, 18.2 PFLOP/s)
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135.0),  # row 4 (43 %, 34.6 PFLOP/s)
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138.0),  # row 5 (44 %, 70.8 PFLOP/s)
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140.0),  # row 6 (45 %, 143.8 PFLOP/s)
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148.0),  # row 7 (47 %, 227.1 PFLOP/s)
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155.0),  # row 8 (50 %, 297.4 PFLOP/s)
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163.0),  # row 9 (52 %, 410.2 PFLOP/s)
    ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163.0),  # row 10 (52 %, 502.0 PFLOP/s)
)
_KORTHIKANTI = (  # name, heads, hidden, layers, tp, pp, GPUs, batch, micro-batch, virtual stages, MFU: KORTHIKANTI_2022
    ("22B", 64, 6144, 48, 8, 1, 8, 4, 4, 1, 0.415),  # Table 3 (micro-batch 4) and Table 5 (MFU 41.5 %, 1.10 s)
    ("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 3, 0.514),  # Table 3, §6 (m = 3 interleaving), Table 5 (51.4 %, 13.75 s)
    ("530B", 128, 20480, 105, 8, 35, 280, 280, 1, 3, 0.560),  # Table 3, §6 (m = 3), Table 5 (56.0 %, 37.83 s)
    ("1T", 160, 25600, 128, 8, 64, 512, 512, 1, None, 0.563),  # Table 3, Table 5 (56.3 %, 71.49 s); searched:
)  # §6 states m = 3 for 175B and 530B only
A100_BF16_PEAK_TFLOPS = 312.0
_LLAMA3 = (  # name, GPUs, cp, sequences per step (16M tokens), sequence length, BF16 TFLOP/s per GPU, BF16 MFU:
    # LLAMA3_2024
    ("Llama 3 405B, 8K GPUs", 8192, 1, 2048, 8192, 430.0, 0.43),  # Table 4 row 1: tp8 cp1 pp16 dp64, 32 per dp
    ("Llama 3 405B, 16K GPUs", 16384, 1, 2048, 8192, 400.0, 0.41),  # row 2: tp8 cp1 pp16 dp128, 16 per dp
    ("Llama 3 405B, 16K GPUs, 131K context", 16384, 16, 128, 131072, 380.0, 0.38),  # row 3: cp16 dp8, 16 per dp
)

RUNS: tuple[PublishedRun, ...] = (
    *(PublishedRun(f"Megatron GPT {n}", MEGATRON_2021, "megatron", A100, g, tp, pp, 1, b, 2048, tf, ("full",), 0,
                   _gpt(a, h, layers), interleaved=True,  # §5.1: the interleaved schedule throughout, v not given
                   notes=("interleaved schedule (§5.1); chunk count searched",))
      for n, a, h, layers, tp, pp, g, b, tf in _MEGATRON),
    *(PublishedRun(f"Korthikanti GPT {n}", KORTHIKANTI_2022, "model", A100, g, tp, pp, 1, b, 2048,
                   mfu * A100_BF16_PEAK_TFLOPS, ("selective",), 1, _gpt(a, h, layers), sequence_parallel=True,
                   micro_batch=(mb,), virtual_stages=(v,) if v else None, interleaved=bool(v and v > 1))
      for n, a, h, layers, tp, pp, g, b, mb, v, mfu in _KORTHIKANTI),
    *(PublishedRun(f"Korthikanti GPT 530B, 2240 GPUs, {mode}", KORTHIKANTI_2022_DP8, "model", A100, 2240, 8, 35, 1,
                   2240, 2048, mfu * A100_BF16_PEAK_TFLOPS, (mode,), 1, _gpt(128, 20480, 105),
                   sequence_parallel=mode == "selective", micro_batch=(1,), virtual_stages=(3,),
                   notes=("Table 3's 530B layout (micro-batch 1, m = 3) with dp = 8; §6.3 multiplies the batch by dp",
                          *(() if mode == "selective" else
                            ("full recomputation without sequence parallelism, as §6.3's baseline",))))
      for mode, mfu in (("selective", 0.542), ("full", 0.421))),
    *(PublishedRun(name, LLAMA3_2024, "palm", H100, gpus, 8, 16, cp, batch, seq, tf, RECOMPUTE_MODES, 2,
                   "llama-3.1-405b", sequence_parallel=True, dropout=False, flash_attention=True,
                   interleaved=True,  # §3.3.2 and Figure 6: interleaved 1F1B, chunk count not given
                   ends_in_split=True,  # §3.3.2 "memory imbalance": one layer fewer on the first and last stages
                   # §3.3.2: "the first model chunk on the first stage has only the embedding, and the last model
                   # chunk on the last stage has only output projection and loss calculation": a chunk is one slot
                   slot_chunks=True,
                   cp_allgather=True,  # §3.3.2: all-gather K and V, then compute the local queries' attention
                   grad_accumulation="separate",  # §3.3.2: DP is FSDP, fp32 gradients accumulated over micro-batches
                   pods=(3072, 7.0),  # §3.3.1: 3,072-GPU pods of full bisection, 1:7 oversubscribed above them
                   published_mfu=mfu,
                   # FlashAttention-2: the flash attention of the run's time (FA3, arXiv:2407.08608, came out on
                   # 2024-07-11, after the pre-training: the 405B was "still training" on 2024-04-18, Meta's Llama 3
                   # announcement; PyTorch 2.2's SDPA (2024-01) and xformers ran FA2 on H100)
                   attention_kernel="fa2",
                   notes=("interleaved schedule (§3.3.2, Figure 6); one layer slot per chunk (§3.3.2: the first "
                          "chunk holds only the embedding), v = (126 + 2) / 16 = 8",
                          "first and last stages one layer fewer: the embedding and the loss take their slots "
                          "(§3.3.2)",
                          "attention costed as FlashAttention-2's mma.sync kernel (FA3 was released after the run)"))
      for name, gpus, cp, batch, seq, tf, mfu in _LLAMA3),
)


def source_flops(run: PublishedRun, cfg: LlmConfig) -> float:
    """FLOPs of one step in the source's convention."""
    if run.convention == "megatron":
        return flops.megatron_flops(run.global_batch, run.seq_len, cfg.layers, cfg.hidden, cfg.vocab)
    if run.convention == "model":
        return flops.model_flops(run.global_batch, run.seq_len, cfg.layers, cfg.hidden, cfg.vocab)
    return flops.palm_flops(cfg, run.global_batch, run.seq_len)


TABLE_CONVENTIONS = ("palm", "palm-causal", "6N")


def convention_flops(cfg: LlmConfig, batch: int, seq: int, convention: str) -> float:
    """A step's FLOPs in one of ``TABLE_CONVENTIONS``: PaLM's (non-causal attention), PaLM's with causal attention,
    or 6N (no attention)."""
    if convention == "palm":
        return flops.palm_flops(cfg, batch, seq)
    if convention == "palm-causal":
        return flops.palm_flops(cfg, batch, seq, causal=True)
    if convention == "6N":
        return flops.six_n_flops(cfg, batch, seq)
    raise ValueError(f"unknown convention {convention!r}; one of {', '.join(TABLE_CONVENTIONS)}")


def implied_attention_tflops(long: PublishedRun, short: PublishedRun, convention: str) -> float:
    """The useful (causal) attention TFLOP/s per device a source's own rows imply if it counted in ``convention``:
    two runs of one model with the same tokens per device, differing in sequence length; each one's step time
    is its FLOPs in that convention over its published TFLOP/s, and the longer run's extra step time is charged to
    its extra causal attention work. Only published figures enter (no prediction); it is a lower bound, since the
    extra time also holds the long run's context-parallel communication. Negative: the count cannot be right."""
    cfg = long.config()
    if short.config() != cfg or long.global_batch * long.seq_len * short.devices != (
            short.global_batch * short.seq_len * long.devices):
        raise ValueError("the two runs need the same model and the same tokens per device")

    def step_s(run: PublishedRun) -> float:
        return convention_flops(cfg, run.global_batch, run.seq_len, convention) / (
            run.published_tflops * 1e12 * run.devices)

    def attention(run: PublishedRun) -> float:
        return flops.causal_attention_flops(cfg, run.global_batch, run.seq_len) / run.devices

    return (attention(long) - attention(short)) / (step_s(long) - step_s(short)) / 1e12


def stated_chunks(run: PublishedRun, cfg: LlmConfig) -> tuple[int, ...]:
    """The chunk counts v to try: the source's where stated (or implied: one layer slot per chunk); else every
    candidate, v > 1 only where the source states the interleaved schedule and pp > 1 (v = 1 left when the stages
    hold one layer each)."""
    if run.virtual_stages:
        return run.virtual_stages
    slots = cfg.layers + (2 if run.ends_in_split else 0)
    if run.slot_chunks and slots % run.pp == 0:
        return (slots // run.pp,)
    candidates = virtual_stage_candidates(slots, run.pp)
    if run.interleaved:
        return tuple(v for v in candidates if v > 1) or candidates
    return candidates


def search(run: PublishedRun, hardware: Hardware | None = None) -> tuple[SearchResult, int, bool]:
    """The run's layouts searched (what it leaves out), the index of the fastest that fits (else the fastest that
    runs, flagged) and whether it fits; ``hardware``: a variant of the run's device to cost it on (experiments)."""
    cfg = run.config()
    dp = run.devices // (run.tp * run.pp * run.cp)
    setup = TrainingSetup(seq_len=run.seq_len, global_batch=run.global_batch, grad_bytes=run.grad_bytes,
                          sequence_parallel=run.sequence_parallel, dropout=run.dropout,
                          flash_attention=run.flash_attention, ends_in_pipeline_split=run.ends_in_split,
                          cp_attention="allgather" if run.cp_allgather else "ring",
                          grad_accumulation=run.grad_accumulation, pod_devices=run.pods[0] if run.pods else None,
                          pod_oversubscription=run.pods[1] if run.pods else 1.0,
                          attention_kernel=run.attention_kernel)
    space = SearchSpace(tp=(run.tp,), pp=(run.pp,), cp=(run.cp,), ep=(1,), zero=(run.zero if dp > 1 else 0,),
                        recompute=run.recompute, micro_batch=run.micro_batch, virtual_stages=stated_chunks(run, cfg),
                        schedules=("1f1b",))
    result = search_layouts(cfg, hardware or resolve_hardware(run.hardware), run.devices, setup, space)
    ranked = result.ranked()
    fits = bool(ranked)
    if not ranked:  # report the fastest that runs, flagged
        ranked = sorted((i for i, r in enumerate(result.reasons) if r.startswith("does not fit")),
                        key=lambda i: float(result.times.step_s[i]))
    if not ranked:
        raise ValueError(f"{run.name}: no layout runs: {sorted(set(result.reasons))[:3]}")
    return result, ranked[0], fits


def published_bounds(run: PublishedRun) -> tuple[float, float] | None:
    """The TFLOP/s per device that both of a source's rounded figures allow: its TFLOP/s to the nearest 10 (two
    significant figures) and its MFU to the nearest 1 % of the device's dense BF16 peak; None without an MFU."""
    peak_flops = resolve_hardware(run.hardware).peak_flops_per_s(DType.BF16)
    if run.published_mfu is None or peak_flops is None:
        return None
    peak = peak_flops / 1e12
    low = max(run.published_tflops - 5.0, (run.published_mfu - 0.005) * peak)
    high = min(run.published_tflops + 5.0, (run.published_mfu + 0.005) * peak)
    if low >= high:
        raise ValueError(f"{run.name}: {run.published_tflops} TFLOP/s and {run.published_mfu:.0%} MFU disagree")
    return low, high


def published_step_s(run: PublishedRun) -> float:
    """The step time the published figure implies: the source's FLOPs per step over its TFLOP/s x devices."""
    return source_flops(run, run.config()) / (run.published_tflops * 1e12 * run.devices)


def predict(run: PublishedRun, hardware: Hardware | None = None) -> dict[str, Any]:
    """The fastest fitting layout among the run's (searching what it leaves out), its predicted TFLOP/s per
    device in the source's convention, and the error against the published figure (``hardware``: as ``search``)."""
    cfg = run.config()
    result, index, fits = search(run, hardware)
    best = result.row(index)
    predicted = source_flops(run, cfg) / (best["step_s"] * run.devices) / 1e12
    # a source that does not state its convention (Llama 3): the same step in the causal count, for the record
    causal = (flops.palm_flops(cfg, run.global_batch, run.seq_len, causal=True) / (best["step_s"] * run.devices)
              / 1e12 if run.convention == "palm" else None)
    return {"name": run.name, "source": run.source, "convention": run.convention, "hardware": run.hardware,
            "devices": run.devices, "published_tflops": run.published_tflops, "predicted_tflops": predicted,
            "error": predicted / run.published_tflops - 1.0, "fits": fits, "layout": best["layout"],
            "step_s": best["step_s"], "time_s": best["time_s"], "predicted_tflops_causal": causal}
