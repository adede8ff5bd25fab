"""Bisection: attribute a regression to a commit and a pass (see perfguard.cli.bisect)."""
