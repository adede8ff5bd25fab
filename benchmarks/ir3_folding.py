"""Old-style IR-3 files: does perfguard's folding now do what ONNX Runtime's own folding does?

Builds (seeded, with onnx.helper, nothing downloaded) an IR-version-3 ResNet-style CNN in the style of
the older model-zoo exports: every initializer is also listed in ``graph.input``, the 3x3 conv weights
are computed at run time (``ConstantOfShape`` times a seeded initializer), every conv is followed by a
BatchNormalization, and the classifier's Reshape takes its shape from a ``Constant`` node. Then it
compares, in one run and on the same file:

* ``none``: perfguard's pipeline with no passes (the file as loaded, ORT at DISABLE_ALL);
* ``fuse+fold``: perfguard's ``["fuse_bn_into_conv", "constant_folding"]`` (ORT at DISABLE_ALL);
* ``fold+fuse+fold``: ``["constant_folding", "fuse_bn_into_conv", "constant_folding"]``: folding
  first lets BN fusion reach the convs whose weights were computed;
* ``ort basic``: ONNX Runtime's own BASIC level on the original file (node count read from
  ``SessionOptions.optimized_model_filepath``).

Latency: 1 thread, the three sessions interleaved round by round (rotated order), median of all
timed runs. Outputs are compared with the ``none`` session.

    python benchmarks/ir3_folding.py [--rounds 15] [--runs 20] [--image-size 112]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfguard.backends.ort import OrtBackend, create_session  # noqa: E402
from perfguard.models.loader import materialize  # noqa: E402
from perfguard.suite import ModelSpec, PipelineSpec  # noqa: E402

WIDTHS = (24, 48, 96, 192)
BLOCKS = 2
CLASSES = 100


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def init(self, prefix: str, array: np.ndarray) -> str:
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(op.lower() + "_")
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def weight(self, cout: int, cin: int, k: int, computed: bool) -> str:
        scale = np.float32(np.sqrt(2.0 / (cin * k * k)))
        if not computed:
            return self.init("w", (self.rng.standard_normal((cout, cin, k, k)) * scale).astype(np.float32))
        shape = self.init("w_shape", np.array([cout, cin, k, k], dtype=np.int64))
        base = self.node("ConstantOfShape", [shape], value=numpy_helper.from_array(np.array([scale], np.float32)))
        noise = self.init("w_noise", self.rng.standard_normal((cout, cin, k, k)).astype(np.float32))
        return self.node("Mul", [base, noise])

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, relu: bool, computed: bool) -> str:
        conv = self.node("Conv", [x, self.weight(cout, cin, k, computed)], kernel_shape=[k, k],
                         strides=[stride, stride], pads=[k // 2] * 4)
        params = [self.init("bn_scale", self.rng.uniform(0.5, 1.5, cout).astype(np.float32)),
                  self.init("bn_bias", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)),
                  self.init("bn_mean", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)),
                  self.init("bn_var", self.rng.uniform(0.5, 2.0, cout).astype(np.float32))]
        out = self.node("BatchNormalization", [conv, *params], epsilon=1e-5)
        return self.node("Relu", [out]) if relu else out


def build_ir3_resnet(image_size: int, seed: int = 0) -> onnx.ModelProto:
    """A ResNet-style IR-3 model (opset 9) with run-time-computed 3x3 weights; a few MB of weights."""
    b = _Builder(seed)
    x = b.conv_bn("input", 3, WIDTHS[0], 3, 2, relu=True, computed=False)
    cin = WIDTHS[0]
    for stage, width in enumerate(WIDTHS):
        for block in range(BLOCKS):
            stride = 2 if stage > 0 and block == 0 else 1
            y = b.conv_bn(x, cin, width, 3, stride, relu=True, computed=True)
            y = b.conv_bn(y, width, width, 3, 1, relu=False, computed=True)
            skip = x if stride == 1 and cin == width else b.conv_bn(x, cin, width, 1, stride, relu=False,
                                                                     computed=False)
            x = b.node("Relu", [b.node("Add", [y, skip])])
            cin = width
    pooled = b.node("GlobalAveragePool", [x])
    shape = b.node("Constant", [], value=numpy_helper.from_array(np.array([1, -1], dtype=np.int64)))
    flat = b.node("Reshape", [pooled, shape])
    fc_w = b.init("fc_w", (b.rng.standard_normal((cin, CLASSES)) * 0.05).astype(np.float32))
    fc_b = b.init("fc_b", np.zeros(CLASSES, np.float32))
    b.nodes.append(helper.make_node("Gemm", [flat, fc_w, fc_b], ["logits"]))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, image_size, image_size])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in b.inits]
    graph = helper.make_graph(b.nodes, "ir3_resnet", inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])],
                              initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    onnx.checker.check_model(model)
    return model


def _settings(level: str) -> dict[str, Any]:
    return {"graph_optimization_level": level, "disabled_optimizers": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per session per round")
    parser.add_argument("--image-size", type=int, default=112)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ir3-bench-") as tmp:
        folder = Path(tmp)
        source = folder / "legacy_resnet.onnx"
        model = build_ir3_resnet(args.image_size)
        onnx.save(model, str(source))
        ops = [n.op_type for n in model.graph.node]
        print(f"model: IR {model.ir_version}, opset 9, {len(ops)} nodes ({ops.count('ConstantOfShape')} "
              f"ConstantOfShape), {len(model.graph.initializer)} initializers all listed in graph.input, "
              f"{source.stat().st_size / 2**20:.1f} MiB, input 1x3x{args.image_size}x{args.image_size}")

        loaded = materialize(ModelSpec("legacy", path=source), folder / "models")
        backend = OrtBackend()
        variants: dict[str, tuple[str, dict[str, Any], int, float]] = {}
        pipelines = (("none", ()), ("fuse+fold", ("fuse_bn_into_conv", "constant_folding")),
                     ("fold+fuse+fold", ("constant_folding", "fuse_bn_into_conv", "constant_folding")))
        for label, passes in pipelines:
            start = time.perf_counter()
            output = backend.compile(loaded.path, PipelineSpec(label, "ort", passes), folder / label)
            seconds = time.perf_counter() - start
            assert output.artifact.node_count is not None
            variants[label] = (output.artifact.path, _settings("disabled"), output.artifact.node_count, seconds)
        optimized = folder / "ort_basic_optimized.onnx"
        start = time.perf_counter()
        create_session(str(source), _settings("basic"), 1, ["CPUExecutionProvider"], optimized_path=str(optimized))
        seconds = time.perf_counter() - start
        variants["ort basic"] = (str(source), _settings("basic"),
                                 len(onnx.load(str(optimized), load_external_data=False).graph.node), seconds)

        sessions = {label: create_session(path, settings, 1, ["CPUExecutionProvider"])
                    for label, (path, settings, _, _) in variants.items()}
        feed = {"input": np.random.default_rng(1).standard_normal((1, 3, args.image_size, args.image_size))
                .astype(np.float32)}
        reference = sessions["none"].run(None, feed)[0]
        times: dict[str, list[float]] = {label: [] for label in sessions}
        labels = list(sessions)
        for session in sessions.values():  # warm up
            for _ in range(3):
                session.run(None, feed)
        for round_index in range(args.rounds):
            order = labels[round_index % len(labels):] + labels[:round_index % len(labels)]
            for label in order:
                session = sessions[label]
                for _ in range(args.runs):
                    start = time.perf_counter()
                    session.run(None, feed)
                    times[label].append(time.perf_counter() - start)

        base = statistics.median(times["none"])
        print(f"{'variant':<14} {'nodes':>6} {'median':>10} {'vs none':>8} {'max |diff|':>11} {'prepare':>9}")
        for label, (_, _, nodes, seconds) in variants.items():
            median = statistics.median(times[label])
            diff = float(np.max(np.abs(sessions[label].run(None, feed)[0] - reference)))
            print(f"{label:<14} {nodes:>6} {median * 1e3:>8.2f}ms {100 * (median / base - 1):>+7.1f}% "
                  f"{diff:>11.2e} {seconds * 1e3:>7.0f}ms")
        print(f"(1 thread, {args.rounds} interleaved rounds x {args.runs} runs per session; "
              "'prepare' = perfguard compile, or ORT BASIC session creation)")


if __name__ == "__main__":
    main()
