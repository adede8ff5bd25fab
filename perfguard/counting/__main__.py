"""The counted process: ``python -m perfguard.counting REQUEST.json RESPONSE.json`` under
callgrind (``perfguard.counting.take`` starts it), serving one ``count_batch`` request
(``perfguard.counting.child``) and answering as every worker does (``perfguard.workers.worker.answer``).
Its own entry point, so the worker process, which serves every other stage, imports nothing of
counting."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from perfguard import quiet_known_warnings
    from perfguard.counting.child import CountBatchRequest, do_count_batch
    from perfguard.workers.worker import answer

    quiet_known_warnings()
    request_path, response_path = argv
    return answer(request_path, response_path, lambda request: do_count_batch(CountBatchRequest.from_json(request)).to_json())


if __name__ == "__main__":
    from perfguard.workers.worker import die_with_parent

    die_with_parent()
    sys.exit(main(sys.argv[1:]))
