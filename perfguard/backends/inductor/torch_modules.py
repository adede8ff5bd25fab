"""The zoo's architectures as ``torch.nn.Module``s, for the ``inductor`` backend.

A suite names a zoo model by ``arch`` and ``params``; perfguard writes it as an ONNX file whose
metadata records both (``perfguard.arch``, ``perfguard.params``). The modules here are built from
that same record, written the way a PyTorch user writes them (``nn.Conv2d`` + ``nn.BatchNorm2d``,
``nn.LayerNorm``, ``nn.GELU``, ``F.interpolate``), and take their weights from the ONNX file's
initializers (the zoo names them like a ``state_dict``: ``layer1.0.conv1.weight_0``). Why the same
weights rather than freshly seeded ones: the compile worker checks every artifact against ONNX
Runtime running the unoptimized ONNX model, so the reference, eager PyTorch and Inductor's code
compute one function and a wrong pass is caught like any other backend's.

A model file without the record (a user's ``.onnx``) is refused with a one-line error. A model
given as a PyTorch callable (``[models.NAME] torch``, the descriptor of
``perfguard.models.torch_callable``) is the user's own module, built again here from the
``sys.path`` root its descriptor records, with torch seeded as when it was described; its
reference is its own eager run (``InductorBackend.reference``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.errors import BackendError, UserError

if TYPE_CHECKING:
    import torch

#: Architectures the backend can build (``legacy_cnn`` is an ONNX-format test, not a PyTorch model).
ARCHITECTURES = ("resnet", "bert", "yolo")
_SUFFIX = re.compile(r"_\d+$")


def build_module(model_path: Path) -> tuple[torch.nn.Module, list[str]]:
    """The eval-mode module of the zoo model at ``model_path`` with its ONNX weights (or of the
    PyTorch callable it describes), and the names of its graph inputs in call order."""
    import onnx

    from perfguard.models.torch_callable import is_torch_model

    if is_torch_model(model_path):
        return user_module(model_path)
    from onnx import numpy_helper

    model = onnx.load(str(model_path))
    meta = {p.key: p.value for p in model.metadata_props}
    arch = meta.get("perfguard.arch")
    if arch not in ARCHITECTURES:
        found = f"architecture {arch!r}" if arch else "no perfguard.arch record (not a zoo model)"
        raise BackendError(f"the inductor backend builds zoo models ({', '.join(ARCHITECTURES)}) as PyTorch "
                           f"modules; {model_path.name} has {found}; give your own module as [models.NAME] torch = "
                           "\"package.module:callable\"")
    params = json.loads(meta["perfguard.params"])
    module = _BUILDERS[arch](params)
    weights = {_SUFFIX.sub("", t.name): numpy_helper.to_array(t) for t in model.graph.initializer}
    _load_weights(module, weights, model_path.name)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    return module.eval(), inputs


def user_module(descriptor: Path) -> tuple[torch.nn.Module, list[str]]:
    """The module of a PyTorch-callable model: its callable imported from the recorded root and
    called with torch seeded; ``BackendError`` when its module's source changed since it was described."""
    from perfguard.backends.inductor.pipeline_config import import_from
    from perfguard.models.torch_callable import TorchModel, build

    model = TorchModel.read(descriptor)
    import_from(model.root, model.callable.partition(":")[0])
    try:
        built = build(model.callable, model.root)
    except UserError as exc:
        raise BackendError(f"torch model {model.callable!r}: {exc}") from None
    if built.source_sha256 != model.source_sha256:
        raise BackendError(f"torch model {model.callable!r}: its module changed since the model was described "
                           f"({built.root}); run again")
    return built.module, [spec.name for spec in model.inputs]


def _load_weights(module: torch.nn.Module, weights: Mapping[str, Any], where: str) -> None:
    import torch

    state = module.state_dict()
    missing = [name for name in state if name not in weights and not name.endswith("num_batches_tracked")]
    if missing:
        raise BackendError(f"{where}: the ONNX file has no weight for {missing[0]} ({len(missing)} missing); "
                           "was it built by this perfguard's zoo?")
    with torch.no_grad():
        for name, tensor in state.items():
            if name in weights:
                tensor.copy_(torch.from_numpy(weights[name].copy()).reshape(tensor.shape))


# -- ResNet ---------------------------------------------------------------------------------------


def _tensor(value: Any) -> torch.Tensor:
    """A module call's result (``nn.Module.__call__`` is untyped) as the tensor it is."""
    return value  # type: ignore[no-any-return]


def _conv(cin: int, cout: int, kernel: int, stride: int = 1, bias: bool = False) -> torch.nn.Conv2d:
    import torch

    return torch.nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, bias=bias)


def _resnet(params: Mapping[str, Any]) -> torch.nn.Module:
    import torch

    from perfguard.models.zoo import resnet_stage_layout

    class BasicBlock(torch.nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = _conv(cin, cout, 3, stride), torch.nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = _conv(cout, cout, 3), torch.nn.BatchNorm2d(cout)
            self.downsample = (torch.nn.Sequential(_conv(cin, cout, 1, stride), torch.nn.BatchNorm2d(cout))
                               if stride != 1 or cin != cout else None)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return _tensor(torch.relu(y + (x if self.downsample is None else self.downsample(x))))

    class ResNet(torch.nn.Module):
        def __init__(self, depth: int, width: int, num_classes: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = _conv(3, width, 7, 2), torch.nn.BatchNorm2d(width)
            channels = width
            for stage, blocks in enumerate(resnet_stage_layout(depth)):
                stage_width = width * 2**stage
                layer = []
                for block in range(blocks):
                    layer.append(BasicBlock(channels, stage_width, 2 if stage > 0 and block == 0 else 1))
                    channels = stage_width
                setattr(self, f"layer{stage + 1}", torch.nn.Sequential(*layer))
            self.stages = len(resnet_stage_layout(depth))
            self.fc = torch.nn.Linear(channels, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1)
            for stage in range(self.stages):
                y = getattr(self, f"layer{stage + 1}")(y)
            return _tensor(self.fc(torch.flatten(torch.mean(y, dim=(2, 3), keepdim=True), 1)))

    return ResNet(int(params["depth"]), int(params["width"]), int(params["num_classes"]))


# -- BERT -----------------------------------------------------------------------------------------


def _bert(params: Mapping[str, Any]) -> torch.nn.Module:
    import torch

    hidden, heads, seq_len = int(params["hidden"]), int(params["heads"]), int(params["seq_len"])
    ffn = int(params.get("ffn") or 4 * hidden)

    class MatMulLinear(torch.nn.Module):
        """``x @ weight + bias`` with the weight stored [in, out], as the zoo's MatMul + Add."""

        def __init__(self, fan_in: int, fan_out: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(fan_in, fan_out))
            self.bias = torch.nn.Parameter(torch.empty(fan_out))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _tensor(x @ self.weight + self.bias)

    class NormedOutput(MatMulLinear):
        def __init__(self, fan_in: int, fan_out: int) -> None:
            super().__init__(fan_in, fan_out)
            self.LayerNorm = torch.nn.LayerNorm(fan_out, eps=1e-12)

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = (MatMulLinear(hidden, hidden) for _ in range(3))
            self.output = MatMulLinear(hidden, hidden)
            self.LayerNorm = torch.nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
            batch = x.shape[0]

            def split(y: torch.Tensor) -> torch.Tensor:
                return y.reshape(batch, seq_len, heads, hidden // heads).transpose(1, 2)

            scores = split(self.query(x)) @ split(self.key(x)).transpose(-1, -2) / (hidden // heads) ** 0.5
            context = torch.softmax(scores + mask_bias, dim=-1) @ split(self.value(x))
            return _tensor(self.output(context.transpose(1, 2).reshape(batch, seq_len, hidden)))

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = Attention()
            self.intermediate = MatMulLinear(hidden, ffn)
            self.output = NormedOutput(ffn, hidden)

        def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
            x = self.attention.LayerNorm(self.attention(x, mask_bias) + x)
            inner = torch.nn.functional.gelu(self.intermediate(x))
            return _tensor(self.output.LayerNorm(self.output(inner) + x))

    class Embeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word_embeddings = torch.nn.Embedding(int(params["vocab"]), hidden)
            self.position_embeddings = torch.nn.Parameter(torch.empty(seq_len, hidden))
            self.LayerNorm = torch.nn.LayerNorm(hidden, eps=1e-12)

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.ModuleList(Layer() for _ in range(int(params["layers"])))

    class Bert(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embeddings = Embeddings()
            self.encoder = Encoder()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            embedded = self.embeddings.word_embeddings(input_ids) + self.embeddings.position_embeddings
            x = self.embeddings.LayerNorm(embedded)
            mask_bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.encoder.layer:
                x = layer(x, mask_bias)
            return _tensor(x)

    return Bert()


# -- YOLO -----------------------------------------------------------------------------------------


def _yolo(params: Mapping[str, Any]) -> torch.nn.Module:
    import torch

    w, image_size = int(params["width"]), int(params["image_size"])
    anchors, outputs = int(params.get("num_anchors", 3)), 5 + int(params["num_classes"])

    class ConvBnSilu(torch.nn.Module):
        def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
            super().__init__()
            self.conv, self.bn = _conv(cin, cout, kernel, stride), torch.nn.BatchNorm2d(cout)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = _tensor(self.bn(self.conv(x)))
            return y * torch.sigmoid(y)

    class Bottleneck(torch.nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.cv1 = ConvBnSilu(channels, channels // 2, 1, 1)
            self.cv2 = ConvBnSilu(channels // 2, channels, 3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _tensor(x + self.cv2(self.cv1(x)))

    class Neck(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lateral5 = ConvBnSilu(16 * w, 8 * w, 1, 1)
            self.merge4 = ConvBnSilu(16 * w, 8 * w, 3, 1)
            self.lateral4 = ConvBnSilu(8 * w, 4 * w, 1, 1)
            self.merge3 = ConvBnSilu(8 * w, 4 * w, 3, 1)

    class Yolo(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = torch.nn.Sequential(
                ConvBnSilu(3, w, 3, 2), ConvBnSilu(w, 2 * w, 3, 2), Bottleneck(2 * w),
                ConvBnSilu(2 * w, 4 * w, 3, 2), Bottleneck(4 * w), ConvBnSilu(4 * w, 8 * w, 3, 2), Bottleneck(8 * w),
                ConvBnSilu(8 * w, 16 * w, 3, 2), Bottleneck(16 * w))
            self.neck = Neck()
            self.head = torch.nn.ModuleList(_conv(c, anchors * outputs, 1, bias=True) for c in (4 * w, 8 * w, 8 * w))

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            b = list(self.backbone)
            y = b[2](b[1](b[0](images)))
            p3 = b[4](b[3](y))
            p4 = b[6](b[5](p3))
            p5 = b[8](b[7](p4))
            up = torch.nn.functional.interpolate
            n5 = self.neck.lateral5(p5)
            n4 = self.neck.merge4(torch.cat([up(n5, scale_factor=2.0, mode="nearest"), p4], dim=1))
            n3 = self.neck.lateral4(n4)
            n3 = self.neck.merge3(torch.cat([up(n3, scale_factor=2.0, mode="nearest"), p3], dim=1))
            batch, decoded = images.shape[0], []
            for head, feature, stride in zip(self.head, (n3, n4, n5), (8, 16, 32), strict=True):
                cells = image_size // stride
                y = head(feature).reshape(batch, anchors, outputs, cells, cells).permute(0, 1, 3, 4, 2)
                decoded.append(torch.sigmoid(y.reshape(batch, anchors * cells * cells, outputs)))
            return torch.cat(decoded, dim=1)

    return Yolo()


_BUILDERS = {"resnet": _resnet, "bert": _bert, "yolo": _yolo}
