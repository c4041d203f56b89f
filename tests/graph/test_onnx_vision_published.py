"""The ONNX backend-test "light" vision models (the ``onnx`` wheel, Apache-2.0) against published counts
(issue 26): convolution + classifier FLOPs against torchvision's ``_ops`` (GMACs at 224×224, the weights' meta in
pytorch/vision ``torchvision/models/*.py``), and BatchNormalization parameters as Caffe-converted models store them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from perfmodel.graph import estimate
from perfmodel.graph.onnx_import import import_onnx

A100 = "nvidia-a100-sxm4-80gb"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize(("model", "published_gmacs"), [
    ("light_resnet50.onnx", 4.089),  # ResNet50_Weights.IMAGENET1K_V1 "_ops"
    ("light_vgg19.onnx", 19.632),  # VGG19_Weights.IMAGENET1K_V1
    ("light_densenet121.onnx", 2.834),  # DenseNet121_Weights.IMAGENET1K_V1
    ("light_squeezenet.onnx", 0.349),  # SqueezeNet1_1_Weights.IMAGENET1K_V1
])
def test_conv_and_gemm_flops_match_torchvision(model: str, published_gmacs: float) -> None:
    """2 × MACs (+ one bias add per output) of every Conv and Gemm, within 0.5 % of torchvision's count."""
    est = estimate(import_onnx(LIGHT / model), A100, fusion=False)
    per_node = sum(v[est.index] for v in est.batch.flops_by_engine.values())
    flops = sum(float(f) for f, n in zip(per_node, est.graph.nodes, strict=True) if n.source_op in ("Conv", "Gemm"))
    assert flops / 2e9 == pytest.approx(published_gmacs, rel=0.005)


def _bn_model(scale: np.ndarray, bias: np.ndarray) -> onnx.ModelProto:
    """Conv → BatchNormalization → Mul / Add by per-channel tensors (Caffe's BatchNorm + Scale layers)."""
    c = len(scale)
    arrays = {"w": np.full((c, 3, 3, 3), 0.1, np.float32), "s": scale, "b": bias,
              "mean": np.zeros(c, np.float32), "var": np.ones(c, np.float32),
              "gamma": np.linspace(0.5, 1.5, c, dtype=np.float32).reshape(c, 1, 1),
              "beta": np.linspace(-1, 1, c, dtype=np.float32).reshape(c, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["h", "s", "b", "mean", "var"], ["n"], name="bn"),
             helper.make_node("Mul", ["n", "gamma"], ["m"], name="scale"),
             helper.make_node("Add", ["m", "beta"], ["y"], name="shift")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


def test_an_identity_batchnorm_affine_is_stored_not_learned() -> None:
    """Caffe's BatchNorm layer has no scale or shift (its Scale layer holds them): converted, the BN gets a scale
    of ones and a bias of zeros, stored bytes like the running statistics; a learned scale still counts."""
    c = 16
    fixed = import_onnx(_bn_model(np.ones(c, np.float32), np.zeros(c, np.float32)))
    learned = import_onnx(_bn_model(np.linspace(0.9, 1.1, c, dtype=np.float32), np.zeros(c, np.float32)))
    bn_fixed = next(n for n in fixed.nodes if n.name == "bn")
    bn_learned = next(n for n in learned.nodes if n.name == "bn")
    assert bn_fixed.params == 0 and bn_fixed.weight_bytes == 4 * 4 * c  # scale, bias, mean, var: bytes
    assert bn_learned.params == 2 * c and bn_learned.weight_bytes == 4 * 4 * c
    assert fixed.params == c * 27 + 2 * c  # the conv and the Scale layer's gamma / beta
    assert learned.params == fixed.params + 2 * c


def test_densenet121_excess_is_its_batchnorm_affine() -> None:
    """The Caffe2 DenseNet-121 applies every BN's affine twice in form (BN scale / bias, then Mul / Add by bn_w /
    bn_b); its file count is torchvision's 7,978,856 plus one more affine per BN (2 × 41,824 channels), less the
    two BNs whose real tensors the light file keeps (conv1 and one 64-channel BN: ones and zeros, 256 values)."""
    graph = import_onnx(LIGHT / "light_densenet121.onnx")
    bn_channels = sum(graph.tensors[n.inputs[1]].shape[0] for n in graph.nodes
                      if n.source_op == "BatchNormalization")
    assert bn_channels == 41_824
    assert graph.params == 7_978_856 + 2 * bn_channels - 256
