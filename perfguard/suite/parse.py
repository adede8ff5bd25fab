"""Reading a suite file: ``load_suite`` (the file) and ``parse_suite`` (its TOML tables)."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perfguard.errors import UserError, did_you_mean
from perfguard.names import name_problem
from perfguard.runners import check_runner_options
from perfguard.runners.options import RunnerOptions
from perfguard.suite.gates import parse_check, parse_thresholds
from perfguard.suite.model import (
    COUNT_MODES,
    CaseSpec,
    CompilerSpec,
    CountMode,
    InputSetting,
    InputSettings,
    MeasureSettings,
    ModelSpec,
    PipelineSpec,
    Suite,
    Tolerance,
)
from perfguard.suite.reader import Reader, describe
from perfguard.units import DAY, HOUR, parse_duration

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


_MEASURE_KEYS = ("workers", "rounds", "min_rounds", "max_time", "warmup", "min_time", "timeout", "compile_timeout",
                 "compile_repeats", "memory_probes", "threads", "seed")
_CORRECTNESS_KEYS = ("rtol", "atol", "seed")
_RUNNER_KEYS = ("options", "device_id", "clock_tolerance", "telemetry_interval")
# The longest each duration key may be (docs/reference/suite.md): a round that must last an hour, a
# worker or a compile allowed more than a day, means a typo ("1e4h"), not a plan; and "1e400s"
# (infinity) would pass for a number until a wait overflows.
_MAX_DURATION = {"min_time": HOUR, "max_time": DAY, "timeout": DAY, "compile_timeout": DAY,
                 "telemetry_interval": HOUR}


def _runner_options(reader: Reader, raw: object, key: str) -> RunnerOptions:
    """A ``[runners.NAME]`` table: provider options (strings or numbers, passed verbatim), device, limits."""
    table = reader.table(raw, key, _RUNNER_KEYS)
    options = RunnerOptions()
    if "options" in table:
        provider_options = reader.table(table["options"], f"{key} options")
        for name, value in provider_options.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise reader.fail(f"{key} options.{name}", "expected a string or a number as the provider documents "
                                  f"it (write booleans as the provider does, e.g. \"1\"), found {describe(value)}")
        options = dataclasses.replace(options, provider_options=dict(provider_options))
    if "device_id" in table:
        options = dataclasses.replace(options, device_id=reader.positive_int(table["device_id"], f"{key} device_id",
                                                                            minimum=0))
    if "clock_tolerance" in table:
        options = dataclasses.replace(options, clock_tolerance=reader.percent(table["clock_tolerance"],
                                                                              f"{key} clock_tolerance"))
    if "telemetry_interval" in table:
        options = dataclasses.replace(options, telemetry_interval=parse_duration(
            table["telemetry_interval"], f"{reader.path}: {key} telemetry_interval",
            at_most=_MAX_DURATION["telemetry_interval"]))
    return options


def _measure(reader: Reader, raw: object, key: str, base: MeasureSettings) -> MeasureSettings:
    table = reader.table(raw, key, _MEASURE_KEYS)
    counts: dict[str, int] = {}
    for name in ("workers", "rounds", "min_rounds", "threads", "compile_repeats"):
        if name in table:
            counts[name] = reader.positive_int(table[name], f"{key}.{name}")
    for name in ("warmup", "seed", "memory_probes"):
        if name in table:
            counts[name] = reader.positive_int(table[name], f"{key}.{name}", minimum=0)

    def duration(name: str, current: float) -> float:
        if name not in table:
            return current
        try:
            return parse_duration(table[name], f"{reader.path}: {key}.{name}", at_most=_MAX_DURATION[name])
        except UserError as exc:
            raise UserError(str(exc)) from None

    return dataclasses.replace(base, **counts, min_time=duration("min_time", base.min_time),
                               max_time=duration("max_time", base.max_time),
                               timeout=duration("timeout", base.timeout),
                               compile_timeout=duration("compile_timeout", base.compile_timeout))


def _tolerance(reader: Reader, raw: object, key: str, base: Tolerance) -> Tolerance:
    table = reader.table(raw, key, _CORRECTNESS_KEYS)
    bounds = {name: reader.non_negative_float(table[name], f"{key}.{name}")
              for name in ("rtol", "atol") if name in table}
    seed = reader.positive_int(table["seed"], f"{key}.seed", minimum=0) if "seed" in table else base.seed
    return dataclasses.replace(base, seed=seed, **bounds)


_INPUT_KEYS = ("shape", "low", "high")


def _input_settings(reader: Reader, spec: Mapping[str, object], key: str) -> InputSettings:
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


_TABLES = ("suite", "compiler", "measure", "correctness", "models", "pipelines", "cases", "overrides", "runners",
           "check", "thresholds")


# ``raw`` and the tables below are the suite's TOML as tomllib returns it (untyped), before
# each key is checked; ``values`` are keyword bags for the settings dataclasses.
def parse_suite(raw: dict[str, object], path: Path, sha256: str = "") -> Suite:
    """Validate the TOML tables of suite file ``path`` into a ``Suite``: one reader for every table,
    in the order the errors are reported."""
    reader = Reader(path)
    reader.table(raw, "", _TABLES)
    check = parse_check(reader, raw.get("check", {}))
    thresholds = parse_thresholds(reader, raw.get("thresholds", {}))
    head = _suite_head(reader, raw.get("suite", {}))
    compiler = _compiler(reader, raw.get("compiler", {}))
    counts, measure_table = _counts(reader, raw.get("measure", {}))
    measure = _measure(reader, measure_table, "[measure]", MeasureSettings())
    tolerance = _tolerance(reader, raw.get("correctness", {}), "[correctness]", Tolerance())
    models = _models(reader, raw.get("models", {}))
    pipelines = _pipelines(reader, raw.get("pipelines", {}), head.backend)
    overrides = _overrides(reader, raw.get("overrides", []))
    cases = _cases(reader, raw.get("cases"), _CaseDefaults(models, pipelines, head.runners, measure, tolerance),
                   overrides)
    runners = _runners(reader, raw.get("runners", {}), sorted({c.runner for c in cases}))
    return Suite(path=path, name=head.name, description=head.description, compiler=compiler, models=models,
                 pipelines=pipelines, cases=tuple(cases), sha256=sha256, runners=runners, check=check,
                 thresholds=thresholds, counts=counts)


def _counts(reader: Reader, raw: object) -> tuple[CountMode | None, object]:
    """``[measure] counts = true`` (or ``"instructions"``): every case also counted under Valgrind
    (``--counts``); ``"cache"``: with the cache simulation too (``--counts-cache``); ``false``: not
    counted (None). A key of the suite's own ``[measure]`` only (a whole run is counted or not), so
    it is taken out of the table before the settings every case shares are read."""
    if not isinstance(raw, dict) or "counts" not in raw:
        return None, raw
    value = raw["counts"]
    rest = {k: v for k, v in raw.items() if k != "counts"}
    if value is True:
        return "instructions", rest
    if value is False:
        return None, rest
    for mode in COUNT_MODES:
        if value == mode:
            return mode, rest
    raise reader.fail("[measure].counts", f'expected true, false, "instructions" or "cache", found {describe(value)}')


@dataclass(frozen=True)
class _SuiteHead:
    """The ``[suite]`` table: the suite's name and the defaults its other tables fall back on."""

    name: str
    description: str
    backend: str
    runners: list[str]


def _name(reader: Reader, name: str, kind: str, key: str) -> str:
    """``name`` of a model, pipeline or runner, refused as ``perfguard.names.name_problem`` says
    (printed with repr, so a hostile one prints safely). The suite's own name is free text: it
    only names files through ``safe_filename``."""
    problem = name_problem(name)
    if problem is not None:
        raise reader.fail(key, f"{kind} name {name!r} {problem}")
    return name


def _runner_names(reader: Reader, names: list[str], key: str) -> list[str]:
    return [_name(reader, name, "runner", key) for name in names]


def _suite_head(reader: Reader, raw: object) -> _SuiteHead:
    head = reader.table(raw, "[suite]", ("name", "description", "backend", "runners"))
    return _SuiteHead(
        name=reader.string(head.get("name", reader.path.stem), "[suite] name"),
        description=str(head.get("description", "")),
        backend=reader.string(head.get("backend", "ort"), "[suite] backend"),
        runners=_runner_names(reader, reader.string_list(head.get("runners", ["cpu"]), "[suite] runners"),
                              "[suite] runners"),
    )


def _compiler(reader: Reader, raw: object) -> CompilerSpec:
    """``[compiler]``: paths relative to the suite file."""
    comp = reader.table(raw, "[compiler]", ("path", "repo", "build"))
    base_dir = reader.path.parent
    return CompilerSpec(
        path=(base_dir / reader.string(comp["path"], "[compiler] path")).resolve() if "path" in comp else None,
        repo=(base_dir / reader.string(comp["repo"], "[compiler] repo")).resolve() if "repo" in comp else None,
        build=reader.string(comp["build"], "[compiler] build") if "build" in comp else None,
    )


def _models(reader: Reader, raw: object) -> dict[str, ModelSpec]:
    models = {_name(reader, name, "model", "[models]"): _model(reader, name, spec)
              for name, spec in reader.table(raw, "[models]").items()}
    if not models:
        raise reader.fail("[models]", "the suite defines no model; add a [models.NAME] table")
    return models


def _model(reader: Reader, name: str, raw: object) -> ModelSpec:
    """``[models.NAME]``: a zoo architecture with params, a model file with input settings, or a
    PyTorch callable (``torch = "package.module:callable"``)."""
    key = f"[models.{name}]"
    spec = reader.table(raw, key, ("arch", "params", "path", "dims", "inputs", "torch"))
    if sum(kind in spec for kind in ("arch", "path", "torch")) != 1:
        raise reader.fail(key, "give exactly one of 'arch' (a zoo architecture), 'path' (an .onnx file) or "
                          "'torch' (a PyTorch callable package.module:callable)")
    if "path" in spec:
        model_path = (reader.path.parent / reader.string(spec["path"], f"{key} path")).resolve()
        return ModelSpec(name=name, path=model_path, input_settings=_input_settings(reader, spec, key))
    fixed = ("zoo models have fixed input shapes; set them with the architecture's params (e.g. batch, seq_len, "
             "image_size)" if "arch" in spec else "a torch model's inputs are the example inputs its callable returns")
    for setting in ("dims", "inputs", *(("params",) if "torch" in spec else ())):
        if setting in spec:
            raise reader.fail(f"{key} {setting}", f"{fixed}; 'dims' and 'inputs' apply to model files ('path'), "
                              "'params' to zoo architectures ('arch')")
    if "torch" in spec:
        return ModelSpec(name=name, torch=_torch_callable(reader, spec["torch"], f"{key} torch"))
    arch = reader.string(spec["arch"], f"{key} arch")
    params = reader.table(spec.get("params", {}), f"{key} params")
    return ModelSpec(name=name, arch=arch, params=dict(params))


def _torch_callable(reader: Reader, raw: object, key: str) -> str:
    """``package.module:callable``, importable from the ``[compiler] path`` (checked when the model is built)."""
    value = reader.string(raw, key)
    module, sep, function = value.partition(":")
    if not sep or not module or not function or ":" in function:
        raise reader.fail(key, f"expected package.module:callable (a function returning a torch.nn.Module and "
                          f"its example inputs), found {value!r}")
    return value


def _pipelines(reader: Reader, raw: object, default_backend: str) -> dict[str, PipelineSpec]:
    """``[pipelines.NAME]``: ordered pass lists on a backend (default: ``[suite] backend``)."""
    pipelines: dict[str, PipelineSpec] = {}
    for name, spec in reader.table(raw, "[pipelines]").items():
        key = f"[pipelines.{_name(reader, name, 'pipeline', '[pipelines]')}]"
        spec = reader.table(spec, key, ("passes", "backend", "options"))
        if "passes" not in spec:
            raise reader.fail(key, "missing 'passes' (an ordered list of pass names; [] for none)")
        pipelines[name] = PipelineSpec(
            name=name,
            backend=reader.string(spec.get("backend", default_backend), f"{key} backend"),
            passes=tuple(reader.string_list(spec["passes"], f"{key} passes")),
            options=dict(reader.table(spec.get("options", {}), f"{key} options")),
        )
    if not pipelines:
        raise reader.fail("[pipelines]", "the suite defines no pipeline; add a [pipelines.NAME] table")
    return pipelines


def _overrides(reader: Reader, raw: object) -> list[tuple[str, dict[str, object]]]:
    """``[[overrides]]``: ``match`` (a glob over case ids) with [measure]/[correctness] settings,
    applied to each case in file order once its own settings are in."""
    if not isinstance(raw, list):
        raise reader.fail("[[overrides]]", f"expected an array of tables, found {describe(raw)}")
    overrides = []
    for index, item in enumerate(raw):
        key = f"[[overrides]] #{index + 1}"
        table = reader.table(item, key, ("match", "measure", "correctness"))
        overrides.append((reader.string(table.get("match"), f"{key} match"), table))
    return overrides


@dataclass(frozen=True)
class _CaseDefaults:
    """What a ``[[cases]]`` entry refers to and falls back on."""

    models: Mapping[str, ModelSpec]
    pipelines: Mapping[str, PipelineSpec]
    runners: list[str]
    measure: MeasureSettings
    tolerance: Tolerance


def _cases(reader: Reader, raw: object, defaults: _CaseDefaults,
           overrides: list[tuple[str, dict[str, object]]]) -> list[CaseSpec]:
    """``[[cases]]``: model x pipelines x runners (default: every model on every pipeline)."""
    if raw is None:
        raw = [{"model": m} for m in defaults.models]
    if not isinstance(raw, list) or not raw:
        raise reader.fail("[[cases]]", "expected a non-empty array of tables [[cases]]")
    cases: list[CaseSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        key = f"[[cases]] #{index + 1}"
        for case in _case_entry(reader, item, key, defaults):
            case = _apply_overrides(reader, case, overrides)
            if case.id in seen:
                raise reader.fail(key, f"case {case.id} is listed twice")
            seen.add(case.id)
            cases.append(case)
    return cases


def _case_entry(reader: Reader, raw: object, key: str, defaults: _CaseDefaults) -> list[CaseSpec]:
    item = reader.table(raw, key, ("model", "pipelines", "runners", "measure", "correctness"))
    model_name = reader.string(item.get("model"), f"{key} model")
    if model_name not in defaults.models:
        raise reader.fail(f"{key} model", _unknown("model", model_name, defaults.models))
    pipe_names = reader.string_list(item.get("pipelines", list(defaults.pipelines)), f"{key} pipelines")
    for pipe_name in pipe_names:
        if pipe_name not in defaults.pipelines:
            raise reader.fail(f"{key} pipelines", _unknown("pipeline", pipe_name, defaults.pipelines))
    runner_names = _runner_names(reader, reader.string_list(item.get("runners", defaults.runners), f"{key} runners"),
                                 f"{key} runners")
    measure = _measure(reader, item.get("measure", {}), f"{key} measure", defaults.measure)
    tolerance = _tolerance(reader, item.get("correctness", {}), f"{key} correctness", defaults.tolerance)
    return [CaseSpec(defaults.models[model_name], defaults.pipelines[pipe_name], runner, measure, tolerance)
            for pipe_name in pipe_names for runner in runner_names]


def _apply_overrides(reader: Reader, case: CaseSpec, overrides: list[tuple[str, dict[str, object]]]) -> CaseSpec:
    for pattern, override in overrides:
        if fnmatch.fnmatchcase(case.id, pattern):
            where = f"[[overrides]] match={pattern!r}"
            case = dataclasses.replace(
                case,
                measure=_measure(reader, override.get("measure", {}), f"{where} measure", case.measure),
                tolerance=_tolerance(reader, override.get("correctness", {}), f"{where} correctness", case.tolerance),
            )
    return case


def _runners(reader: Reader, raw: object, used: list[str]) -> dict[str, RunnerOptions]:
    """``[runners.NAME]``: settings of a runner some case uses, checked against what it takes."""
    runners: dict[str, RunnerOptions] = {}
    for name, spec in reader.table(raw, "[runners]").items():
        _name(reader, name, "runner", "[runners]")
        key = f'[runners."{name}"]' if ":" in name else f"[runners.{name}]"
        if name not in used:
            raise reader.fail(key, f"no case runs on runner {name!r}; cases use: {', '.join(used)}")
        runners[name] = _runner_options(reader, spec, key)
        try:  # the runner kind refuses settings it does not use (device_id on cpu, say), named here with the key
            check_runner_options(name, runners[name])
        except UserError as exc:
            raise reader.fail(key, str(exc)) from None
    return runners


def _unknown(kind: str, name: str, valid: Mapping[str, object]) -> str:
    return f"unknown {kind} {name!r}{did_you_mean(name, valid, most=1)}; defined: {', '.join(valid)}"


def builtin_suite_path(name: str = "smoke") -> Path:
    """Path of a suite shipped with perfguard (``suites/`` in a checkout, ``_suites`` when installed)."""
    here = Path(__file__).resolve().parent.parent  # the perfguard package
    for folder in (here / "_suites", here.parent / "suites"):
        candidate = folder / f"{name}.toml"
        if candidate.is_file():
            return candidate
    raise UserError(f"built-in suite {name!r} not found in this installation")
