"""What composes the stages: check against a ref, a pipeline or a baseline, compile here and
measure there, the probe that bisect and tune share, the bisection and tune drivers, the night.

Each flow is a function callable without argparse; the CLI only parses arguments and prints.
The package sits above every stage (and the history store it reads), below the CLI only.
"""
