"""User models for the ``inductor`` backend: ``[models.NAME] torch = "package.module:callable"``.

Real throughout: the callable is imported and called in perfguard's child process, the run compiles
with ``torch.compile`` on the CPU (one module-scoped ``perfguard run`` of a tiny CNN under two
pipelines, about a minute on a loaded 2-core machine) and checks it against the module run eagerly.
The bad-input lines call the same ``build`` the child calls, in this process (torch is imported
once), plus one CLI run for the exit code. Skipped without torch as ``tests/test_inductor.py`` is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfguard.errors import BackendError, UserError
from perfguard.exit_codes import ExitCode
from perfguard.models.loader import materialize
from perfguard.models.torch_callable import TorchModel, build
from perfguard.suite import ModelSpec, load_suite

from .conftest import REPO, run_cli, smallest_measure
from .test_inductor import _torch_installed  # noqa: F401  (autouse: skipped without torch, as there)

MODEL_SOURCE = '''
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, SCALE)

    def forward(self, images, offset):
        y = torch.relu(self.conv(images))
        return self.head(torch.mean(y, dim=(2, 3))) + offset.float().sum()


def tiny():
    return Tiny(), (torch.randn(2, 3, 8, 8), torch.tensor([0, 3, 5]))


def raises():
    raise ValueError("no weights here")


def returns_a_module():
    return Tiny()


def returns_a_dict():
    return Tiny(), {"images": torch.randn(2, 3, 8, 8)}


def wrong_inputs():
    return Tiny(), (torch.randn(2, 5, 8, 8), torch.tensor([0]))


NOT_CALLABLE = 3
'''

# Drops every relu: a pass that is wrong for any input with negative values.
WRONG_PASS = '''
import torch


def drop_relu(graph):
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target == torch.ops.aten.relu.default:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
'''


def _compiler(folder: Path, scale: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "user_models.py").write_text(MODEL_SOURCE.replace("SCALE", str(scale)))
    (folder / "wrong_passes.py").write_text(WRONG_PASS)
    return folder


def _suite(folder: Path, backend: str = "inductor", model: str = 'torch = "user_models:tiny"') -> Path:
    wrong = '[pipelines.wrong]\npasses = ["wrong_passes:drop_relu"]\n' if backend == "inductor" else ""
    path = folder / "suite.toml"
    path.write_text(f'[suite]\nbackend = "{backend}"\n[compiler]\npath = "compiler"\n[models.mine]\n{model}\n'
                    f'[pipelines.default]\npasses = []\n{wrong}{smallest_measure()}threads = 1\n')
    return path


@pytest.fixture(scope="module")
def run_result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("user-model-run")
    _compiler(folder / "compiler")
    out = folder / "result.json"
    proc = run_cli("run", str(_suite(folder)), "--out", str(out), timeout=900)
    assert out.exists(), proc.stderr
    return {"returncode": proc.returncode, "stderr": proc.stderr, "stdout": proc.stdout,
            "document": json.loads(out.read_text())}


@pytest.mark.slow
def test_a_user_model_compiles_and_matches_its_eager_run(run_result: dict) -> None:
    cases = {c["pipeline"]: c for c in run_result["document"]["cases"]}
    default = cases["default"]
    assert default["correctness"]["status"] == "verified", default
    assert default["correctness"]["max_abs_error"] < 1e-4
    assert default["metrics"]["latency_s"]["median"] > 0
    model = run_result["document"]["models"]["mine"]
    assert model["source"] == {"torch": "user_models:tiny"} and model["opset"] == 0
    assert model["nodes"] >= 5  # conv, relu, mean, head, add... of the FX graph
    assert [(i["name"], i["dtype"], i["shape"]) for i in model["inputs"]] == [
        ("images", "float32", [2, 3, 8, 8]), ("offset", "int64", [3])]
    assert "mine/default/cpu" in run_result["stdout"]


@pytest.mark.slow
def test_a_wrong_fx_pass_on_a_user_model_is_caught_by_correctness(run_result: dict) -> None:
    wrong = {c["pipeline"]: c for c in run_result["document"]["cases"]}["wrong"]
    assert wrong["error"]["stage"] == "correctness", wrong
    assert "wrong answer" in wrong["error"]["message"]
    assert wrong["correctness"]["status"] == "failed"
    assert run_result["returncode"] != 0


def test_the_identity_follows_the_models_source(tmp_path: Path) -> None:
    spec = ModelSpec("mine", torch="user_models:tiny")
    first = materialize(spec, tmp_path / "m1", _compiler(tmp_path / "a"))
    again = materialize(spec, tmp_path / "m2", _compiler(tmp_path / "b"))
    changed = materialize(spec, tmp_path / "m3", _compiler(tmp_path / "c", scale=5))
    assert first.sha256 == again.sha256  # the same source in another folder is the same model
    assert changed.sha256 != first.sha256
    described = TorchModel.read(first.path)
    assert described.root == str((tmp_path / "a").resolve()) and first.node_count == described.node_count


def test_the_backend_refuses_a_model_whose_source_changed_since(tmp_path: Path) -> None:
    from perfguard.backends.inductor.torch_modules import user_module

    compiler = _compiler(tmp_path / "compiler")
    loaded = materialize(ModelSpec("mine", torch="user_models:tiny"), tmp_path / "models", compiler)
    module, names = user_module(loaded.path)
    assert names == ["images", "offset"] and not module.training
    (compiler / "user_models.py").write_text(MODEL_SOURCE.replace("SCALE", "6"))
    with pytest.raises(BackendError, match="its module changed since the model was described"):
        user_module(loaded.path)


@pytest.mark.parametrize(("callable_name", "expected"), [
    ("user_modls:tiny", r"no module 'user_modls' in the \[compiler\] path .*did you mean 'user_models'"),
    ("user_models:tiyn", r"module user_models has no callable 'tiyn' \(did you mean 'tiny'"),
    ("user_models:NOT_CALLABLE", r"user_models.NOT_CALLABLE is a int, not a callable"),
    ("user_models:raises", r"calling user_models:raises raised ValueError: no weights here"),
    ("user_models:returns_a_module", r"returned a Tiny; it must return \(module, example_inputs\)"),
    ("user_models:returns_a_dict", r"as a dict; return a tuple of tensors"),
    ("user_models:wrong_inputs", r"does not run on its example inputs: RuntimeError"),
])
def test_a_bad_callable_is_one_line_saying_what_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       callable_name: str, expected: str) -> None:
    compiler = _compiler(tmp_path / "compiler")
    monkeypatch.syspath_prepend(str(compiler))
    monkeypatch.delitem(__import__("sys").modules, "user_models", raising=False)
    with pytest.raises(UserError, match=expected) as caught:
        build(callable_name, str(compiler))
    assert "\n" not in str(caught.value)


def test_a_bad_callable_in_a_run_exits_2_naming_the_model(tmp_path: Path) -> None:
    _compiler(tmp_path / "compiler")
    proc = run_cli("run", str(_suite(tmp_path, model='torch = "user_models:raises"')), "--out",
                   str(tmp_path / "r.json"))
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("perfguard:") and "model mine" not in line]
    assert lines[-1] == ("perfguard: error: model 'mine' (torch = 'user_models:raises'): calling user_models:raises "
                         "raised ValueError: no weights here")
    assert "Traceback" not in proc.stderr


def test_validate_imports_the_callable_with_the_user_passes(tmp_path: Path) -> None:
    _compiler(tmp_path / "compiler")
    proc = run_cli("validate", str(_suite(tmp_path, model='torch = "user_models:tiyn"')))
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert ("[models.mine] torch: model callable 'user_models:tiyn': module user_models has no function 'tiyn' "
            "(did you mean 'tiny'?)") in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("backend", ["ort", "tvm", "iree"])
def test_another_backend_refuses_a_torch_model_in_one_line(tmp_path: Path, backend: str) -> None:
    _compiler(tmp_path / "compiler")
    proc = run_cli("validate", str(_suite(tmp_path, backend=backend)))
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (f"model 'mine' is a PyTorch callable (torch = 'user_models:tiny'); only the inductor backend compiles "
            f"those, and pipeline 'default' is on backend '{backend}'") in proc.stderr


@pytest.mark.parametrize(("model", "expected"), [
    ('torch = "user_models"', "expected package.module:callable"),
    ('torch = "user_models:tiny"\narch = "resnet"', "give exactly one of 'arch'"),
    ('torch = "user_models:tiny"\ndims = { n = 2 }', "a torch model's inputs are the example inputs"),
    ('torch = "user_models:tiny"\nparams = { n = 2 }', "'params' to zoo architectures"),
])
def test_the_suite_key_is_checked_for_form(tmp_path: Path, model: str, expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        load_suite(_suite(tmp_path, model=model))


def test_the_example_suite_names_an_importable_user_model(tmp_path: Path) -> None:
    suite = load_suite(REPO / "suites" / "inductor-user-model.toml")
    (spec,) = suite.models.values()
    loaded = materialize(spec, tmp_path, suite.compiler.path)
    assert loaded.inputs[0].shape == (1, 3, 32, 32) and loaded.node_count > 0
