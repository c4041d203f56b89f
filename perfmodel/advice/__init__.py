"""``perfmodel.advice``: partition (device vs host fallback) and precision (fp8/int8/int4) advice for compilers."""
