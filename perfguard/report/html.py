"""The HTML report: one self-contained file from Jinja templates, with inline CSS, SVG and script.

Autoescape is on for every template, and every string shows its control and bidi characters as
escapes (:func:`perfguard.report.escape.html_value`); charts come from :mod:`perfguard.report.svg` as ``Markup``
built from numbers only. The page carries a Content-Security-Policy that allows nothing to load
(``default-src 'none'``) and runs only the inline style and script whose SHA-256 hashes it names,
so an injected ``<script>`` would not run even if escaping ever failed, and no request leaves the
page. The script only sorts and filters tables; without it the page is complete.
"""

from __future__ import annotations

import base64
import hashlib
import math
from functools import cache
from typing import TYPE_CHECKING

from markupsafe import Markup

from perfguard.report import format as fmt
from perfguard.report.cases import env_text
from perfguard.report.escape import html_value
from perfguard.report.model import Report
from perfguard.report.rows import SEVERITY, STATE_LABELS

if TYPE_CHECKING:
    import jinja2


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("perfguard.report", "templates"),
                             autoescape=True, finalize=html_value, undefined=jinja2.StrictUndefined,
                             trim_blocks=False, lstrip_blocks=False)
    env.filters.update({
        "change": fmt.change, "interval": fmt.interval, "pvalue": fmt.p_value, "mde": fmt.mde,
        "quantity": fmt.quantity, "seconds": fmt.seconds, "percent": fmt.percent,
        "state_label": lambda state: STATE_LABELS.get(state, state), "env_text": env_text,
        "env_value": lambda values, key: env_text(values.get(key)), "timestamp": fmt.timestamp,
    })
    env.globals.update({"severity": SEVERITY, "inf": math.inf})
    return env


def _asset(name: str) -> str:
    from importlib import resources

    return resources.files("perfguard.report").joinpath("templates", name).read_text(encoding="utf-8")


def render_html(report: Report) -> str:
    """The report as one HTML document (a string)."""
    style, script = _asset("report.css"), _asset("report.js")
    env_keys: list[str] = []
    for _, _, values in report.environments:
        env_keys += [k for k in values if k not in env_keys]
    template = _environment().get_template("report.html.j2")
    # The stylesheet and script are perfguard's own files, not document text: inserted verbatim so
    # their CSP hashes match byte for byte.
    return str(template.render(report=report, style=Markup(style), script=Markup(script),
                               style_hash=_csp_hash(style), script_hash=_csp_hash(script),
                               env_keys=sorted(env_keys)))
