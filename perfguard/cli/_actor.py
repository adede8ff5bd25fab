"""Who is acting on an alert: learned here, by the front end, and passed down.

The store records the ``who`` of every alert event, and ``history notify`` the ``who`` of the issue
links it records; neither asks the system: learning it may start ``git`` (the global
``user.name``), and the store is a layer that starts no process. :func:`current_user` is asked once
per command, and its answer travels as a ``who: str`` parameter.
"""

from __future__ import annotations

import getpass
import os
import subprocess


def current_user(by: str | None = None) -> str:
    """Who is acting: ``$GITHUB_ACTOR`` in a workflow (the user who triggered it), else ``by``
    (``--by``), else the global git ``user.name`` (never the current folder's repository config:
    run inside a compiler checkout, that named whoever set up the checkout), else the system user."""
    actor = os.environ.get("GITHUB_ACTOR", "").strip()
    if actor:
        return actor
    if by is not None and by.strip():
        return by.strip()
    try:
        done = subprocess.run(["git", "config", "--global", "user.name"], capture_output=True, text=True, timeout=10,
                              check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"
