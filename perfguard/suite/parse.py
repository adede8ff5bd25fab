"""Reading a suite file: ``load_suite`` (the file) and ``parse_suite`` (its TOML tables)."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfguard.errors import UserError, did_you_mean
from perfguard.runners import get_runner
from perfguard.runners.options import RunnerOptions
from perfguard.suite.gates import parse_check, parse_thresholds
from perfguard.suite.model import (
    CaseSpec,
    CompilerSpec,
    InputSetting,
    InputSettings,
    MeasureSettings,
    ModelSpec,
    PipelineSpec,
    Suite,
    Tolerance,
)
from perfguard.suite.reader import Reader, describe
from perfguard.units import parse_duration

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


_MEASURE_KEYS = ("workers", "rounds", "warmup", "min_time", "timeout", "compile_timeout", "compile_repeats",
                 "memory_probes", "threads", "seed")
_CORRECTNESS_KEYS = ("rtol", "atol", "seed")
_RUNNER_KEYS = ("options", "device_id", "clock_tolerance", "telemetry_interval")


def _runner_options(reader: Reader, raw: Any, key: str) -> RunnerOptions:
    """A ``[runners.NAME]`` table: provider options (strings or numbers, passed verbatim), device, limits."""
    table = reader.table(raw, key, _RUNNER_KEYS)
    values: dict[str, Any] = {}
    if "options" in table:
        options = reader.table(table["options"], f"{key} options")
        for name, value in options.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise reader.fail(f"{key} options.{name}", "expected a string or a number as the provider documents "
                                  f"it (write booleans as the provider does, e.g. \"1\"), found {describe(value)}")
        values["provider_options"] = dict(options)
    if "device_id" in table:
        values["device_id"] = reader.positive_int(table["device_id"], f"{key} device_id", minimum=0)
    if "clock_tolerance" in table:
        values["clock_tolerance"] = reader.percent(table["clock_tolerance"], f"{key} clock_tolerance")
    if "telemetry_interval" in table:
        values["telemetry_interval"] = parse_duration(table["telemetry_interval"], f"{reader.path}: {key} telemetry_interval")
    return RunnerOptions(**values)


def _measure(reader: Reader, raw: Any, key: str, base: MeasureSettings) -> MeasureSettings:
    table = reader.table(raw, key, _MEASURE_KEYS)
    values: dict[str, Any] = {}
    for name in ("workers", "rounds", "threads", "compile_repeats"):
        if name in table:
            values[name] = reader.positive_int(table[name], f"{key}.{name}")
    for name in ("warmup", "seed", "memory_probes"):
        if name in table:
            values[name] = reader.positive_int(table[name], f"{key}.{name}", minimum=0)
    for name in ("min_time", "timeout", "compile_timeout"):
        if name in table:
            try:
                values[name] = parse_duration(table[name], f"{reader.path}: {key}.{name}")
            except UserError as exc:
                raise UserError(str(exc)) from None
    return dataclasses.replace(base, **values)


def _tolerance(reader: Reader, raw: Any, key: str, base: Tolerance) -> Tolerance:
    table = reader.table(raw, key, _CORRECTNESS_KEYS)
    values: dict[str, Any] = {}
    for name in ("rtol", "atol"):
        if name in table:
            values[name] = reader.non_negative_float(table[name], f"{key}.{name}")
    if "seed" in table:
        values["seed"] = reader.positive_int(table["seed"], f"{key}.seed", minimum=0)
    return dataclasses.replace(base, **values)


_INPUT_KEYS = ("shape", "low", "high")


def _input_settings(reader: Reader, spec: dict[str, Any], key: str) -> InputSettings:
    """``dims = { seq = 128 }`` and ``inputs.NAME = { shape = [8, 128], low = 0, high = 30522 }``.

    Checked here for form; against the model's declared inputs when the model is read."""
    dims: dict[str, int] = {}
    for name, value in reader.table(spec.get("dims", {}), f"{key} dims").items():
        dims[name] = reader.positive_int(value, f"{key} dims.{name}")
    inputs: dict[str, InputSetting] = {}
    for name, raw in reader.table(spec.get("inputs", {}), f"{key} inputs").items():
        where = f"{key} inputs.{name}"
        table = reader.table(raw, where, _INPUT_KEYS)
        if not table:
            raise reader.fail(where, f"expected at least one of: {', '.join(_INPUT_KEYS)}, found an empty table")
        shape = None
        if "shape" in table:
            value = table["shape"]
            if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                                      for v in value):
                raise reader.fail(f"{where}.shape", f"expected a list of integers >= 1 (one per axis, e.g. "
                                  f"[8, 128]), found {describe(value)}")
            shape = tuple(value)
        bounds: dict[str, int] = {}
        for bound in ("low", "high"):
            if bound in table:
                value = table[bound]
                if isinstance(value, bool) or not isinstance(value, int):
                    raise reader.fail(f"{where}.{bound}", f"expected an integer, found {describe(value)}")
                bounds[bound] = value
        if len(bounds) == 1:
            missing = "high" if "low" in bounds else "low"
            raise reader.fail(where, f"give both 'low' and 'high' (values are drawn from [low, high)), "
                              f"found only {next(iter(bounds))!r}; add {missing!r}")
        if bounds and bounds["low"] >= bounds["high"]:
            raise reader.fail(f"{where}.high", f"expected an integer > low ({bounds['low']}); values are drawn "
                              f"from [low, high), found {bounds['high']}")
        inputs[name] = InputSetting(shape, bounds.get("low"), bounds.get("high"))
    return InputSettings(dims, inputs, f"{reader.path}: {key}")


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file; raise ``UserError`` naming file and key on any problem."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: suite file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read suite file: {exc.strerror}") from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a UTF-8 text file; a suite is TOML") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: malformed TOML: {exc}") from None
    return parse_suite(raw, path, hashlib.sha256(data).hexdigest())


def parse_suite(raw: dict[str, Any], path: Path, sha256: str = "") -> Suite:
    reader = Reader(path)
    reader.table(raw, "", ("suite", "compiler", "measure", "correctness", "models", "pipelines", "cases",
                           "overrides", "runners", "check", "thresholds"))
    check = parse_check(raw.get("check", {}), f"{path}: [check]")
    thresholds = parse_thresholds(raw.get("thresholds", {}), f"{path}: [thresholds]", path.parent)
    head = reader.table(raw.get("suite", {}), "[suite]", ("name", "description", "backend", "runners"))
    name = reader.string(head.get("name", path.stem), "[suite] name")
    description = str(head.get("description", ""))
    default_backend = reader.string(head.get("backend", "ort"), "[suite] backend")
    default_runners = reader.string_list(head.get("runners", ["cpu"]), "[suite] runners")

    comp = reader.table(raw.get("compiler", {}), "[compiler]", ("path", "repo", "build"))
    base_dir = path.parent
    compiler = CompilerSpec(
        path=(base_dir / reader.string(comp["path"], "[compiler] path")).resolve() if "path" in comp else None,
        repo=(base_dir / reader.string(comp["repo"], "[compiler] repo")).resolve() if "repo" in comp else None,
        build=reader.string(comp["build"], "[compiler] build") if "build" in comp else None,
    )

    measure = _measure(reader, raw.get("measure", {}), "[measure]", MeasureSettings())
    tolerance = _tolerance(reader, raw.get("correctness", {}), "[correctness]", Tolerance())

    models: dict[str, ModelSpec] = {}
    for model_name, spec in reader.table(raw.get("models", {}), "[models]").items():
        key = f"[models.{model_name}]"
        spec = reader.table(spec, key, ("arch", "params", "path", "dims", "inputs"))
        if ("arch" in spec) == ("path" in spec):
            raise reader.fail(key, "give exactly one of 'arch' (a zoo architecture) or 'path' (an .onnx file)")
        if "path" in spec:
            model_path = (base_dir / reader.string(spec["path"], f"{key} path")).resolve()
            settings = _input_settings(reader, spec, key)
            models[model_name] = ModelSpec(name=model_name, path=model_path, input_settings=settings)
        else:
            for setting in ("dims", "inputs"):
                if setting in spec:
                    raise reader.fail(f"{key} {setting}", "zoo models have fixed input shapes; set them with the "
                                      "architecture's params (e.g. batch, seq_len, image_size); "
                                      "'dims' and 'inputs' apply to model files ('path')")
            arch = reader.string(spec["arch"], f"{key} arch")
            params = reader.table(spec.get("params", {}), f"{key} params")
            models[model_name] = ModelSpec(name=model_name, arch=arch, params=dict(params))
    if not models:
        raise reader.fail("[models]", "the suite defines no model; add a [models.NAME] table")

    pipelines: dict[str, PipelineSpec] = {}
    for pipe_name, spec in reader.table(raw.get("pipelines", {}), "[pipelines]").items():
        key = f"[pipelines.{pipe_name}]"
        spec = reader.table(spec, key, ("passes", "backend", "options"))
        if "passes" not in spec:
            raise reader.fail(key, "missing 'passes' (an ordered list of pass names; [] for none)")
        pipelines[pipe_name] = PipelineSpec(
            name=pipe_name,
            backend=reader.string(spec.get("backend", default_backend), f"{key} backend"),
            passes=tuple(reader.string_list(spec["passes"], f"{key} passes")),
            options=dict(reader.table(spec.get("options", {}), f"{key} options")),
        )
    if not pipelines:
        raise reader.fail("[pipelines]", "the suite defines no pipeline; add a [pipelines.NAME] table")

    overrides = []
    raw_overrides = raw.get("overrides", [])
    if not isinstance(raw_overrides, list):
        raise reader.fail("[[overrides]]", f"expected an array of tables, found {describe(raw_overrides)}")
    for index, item in enumerate(raw_overrides):
        key = f"[[overrides]] #{index + 1}"
        item = reader.table(item, key, ("match", "measure", "correctness"))
        overrides.append((reader.string(item.get("match"), f"{key} match"), item))

    raw_cases = raw.get("cases")
    if raw_cases is None:
        raw_cases = [{"model": m} for m in models]
    if not isinstance(raw_cases, list) or not raw_cases:
        raise reader.fail("[[cases]]", "expected a non-empty array of tables [[cases]]")
    cases: list[CaseSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(raw_cases):
        key = f"[[cases]] #{index + 1}"
        item = reader.table(item, key, ("model", "pipelines", "runners", "measure", "correctness"))
        model_name = reader.string(item.get("model"), f"{key} model")
        if model_name not in models:
            raise reader.fail(f"{key} model", _unknown("model", model_name, models))
        pipe_names = reader.string_list(item.get("pipelines", list(pipelines)), f"{key} pipelines")
        for pipe_name in pipe_names:
            if pipe_name not in pipelines:
                raise reader.fail(f"{key} pipelines", _unknown("pipeline", pipe_name, pipelines))
        runner_names = reader.string_list(item.get("runners", default_runners), f"{key} runners")
        case_measure = _measure(reader, item.get("measure", {}), f"{key} measure", measure)
        case_tol = _tolerance(reader, item.get("correctness", {}), f"{key} correctness", tolerance)
        for pipe_name in pipe_names:
            for runner in runner_names:
                case = CaseSpec(models[model_name], pipelines[pipe_name], runner, case_measure, case_tol)
                for pattern, override in overrides:
                    if fnmatch.fnmatchcase(case.id, pattern):
                        where = f"[[overrides]] match={pattern!r}"
                        case = dataclasses.replace(
                            case,
                            measure=_measure(reader, override.get("measure", {}), f"{where} measure", case.measure),
                            tolerance=_tolerance(reader, override.get("correctness", {}),
                                                 f"{where} correctness", case.tolerance),
                        )
                if case.id in seen:
                    raise reader.fail(key, f"case {case.id} is listed twice")
                seen.add(case.id)
                cases.append(case)
    runners: dict[str, RunnerOptions] = {}
    used = sorted({c.runner for c in cases})
    for runner_name, spec in reader.table(raw.get("runners", {}), "[runners]").items():
        key = f'[runners."{runner_name}"]' if ":" in runner_name else f"[runners.{runner_name}]"
        if runner_name not in used:
            raise reader.fail(key, f"no case runs on runner {runner_name!r}; cases use: {', '.join(used)}")
        runners[runner_name] = _runner_options(reader, spec, key)
        try:  # the runner refuses settings it does not use (device_id on cpu, say), named here with the key
            get_runner(runner_name, options=runners[runner_name])
        except UserError as exc:
            raise reader.fail(key, str(exc)) from None
    return Suite(path=path, name=name, description=description, compiler=compiler, models=models,
                 pipelines=pipelines, cases=tuple(cases), sha256=sha256, runners=runners, check=check,
                 thresholds=thresholds)


def _unknown(kind: str, name: str, valid: Mapping[str, Any]) -> str:
    return f"unknown {kind} {name!r}{did_you_mean(name, valid, most=1)}; defined: {', '.join(valid)}"


def builtin_suite_path(name: str = "smoke") -> Path:
    """Path of a suite shipped with perfguard (``suites/`` in a checkout, ``_suites`` when installed)."""
    here = Path(__file__).resolve().parent.parent  # the perfguard package
    for folder in (here / "_suites", here.parent / "suites"):
        candidate = folder / f"{name}.toml"
        if candidate.is_file():
            return candidate
    raise UserError(f"built-in suite {name!r} not found in this installation")
