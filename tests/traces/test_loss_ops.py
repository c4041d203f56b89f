"""``aten::mse_loss`` and its backward on the real ROCm 6.2 Kineto trace (``Concrete Inputs``: reduction 1 = mean)."""

from __future__ import annotations

from trace_builders import DATA

from perfmodel.traces import match_runs, parse_trace


def test_mse_loss_forward_and_backward_take_their_kernels() -> None:
    parsed = parse_trace(DATA / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    result = match_runs(parsed)
    ops = {}
    for kernel, index in zip(parsed.kernels, result.kernel_runs, strict=True):
        if "mse" in kernel.name:
            assert index is not None, kernel.name
            ops[kernel.ops[-1].name] = result.runs[index].op
    # forward: x and y read, the squared errors written and read again by the mean; backward: x, y read (its
    # gradient is a scalar: the loss was reduced)
    assert ops == {
        "aten::mse_loss": {"kind": "elementwise", "shape": [5, 128], "dtype": "fp32", "inputs": 3, "outputs": 1,
                           "flops_per_element": 3.0},
        "aten::mse_loss_backward": {"kind": "elementwise", "shape": [5, 128], "dtype": "fp32", "inputs": 2,
                                    "outputs": 1, "flops_per_element": 3.0}}
