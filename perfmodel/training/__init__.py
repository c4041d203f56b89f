"""Training at scale: ZeRO/FSDP, activation recomputation, gradient accumulation, context parallelism,
interleaved pipelines, offload, and a vectorised search over parallel layouts (docs/training.md).

- ``layout``: the choices of one run (``Layout``) and what every layout shares (``TrainingSetup``).
- ``memory``: bytes per device (ZeRO model states, Korthikanti activations).
- ``costs``: per-layer times from the op model, once per (tp, cp, micro-batch, ep).
- ``step``: step time of many layouts at once (numpy over layouts).
- ``search``: every layout of a device count, ranked; reasons for the impossible ones.
- ``fit``: the smallest change that makes a layout fit.
- ``published``: published training throughputs and their predictions.
"""
