"""Checks every backend's settings parser makes of a pipeline's ``options`` table.

Each backend (``ort_settings``, ``iree_settings``, ``tvm_settings``, the mock's ``check_pipeline``)
refuses a key it does not take and a value that is not one of its names in one wording: the
``UserError`` names where (the pipeline), the key, the value and the valid names with a "did you
mean". Inductor's parser words its unknown key differently (``expected a, b`` in its own order)
and keeps its own check.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from perfguard.errors import UserError, unknown_name_message


def check_option_keys(options: Mapping[str, object], valid: Collection[str], backend: str, where: str) -> None:
    """Refuse the first key of ``options`` that is not in ``valid``: ``UserError`` "``where``:
    unknown ``backend`` option 'x' (did you mean 'y'?); valid: ..."."""
    for key in options:
        if key not in valid:
            raise UserError(f"{where}: " + unknown_name_message(f"{backend} option", key, valid))


def option_choice(options: Mapping[str, object], key: str, default: str, choices: Collection[str], kind: str,
                  where: str) -> str:
    """The value of ``key`` (``default`` when absent), which must be one of ``choices``; else
    ``UserError`` "``where``: ``key``: unknown ``kind`` 'x' (did you mean 'y'?); valid: ..."."""
    value = options.get(key, default)
    if value not in choices:
        raise UserError(f"{where}: {key}: " + unknown_name_message(kind, str(value), choices))
    return str(value)
