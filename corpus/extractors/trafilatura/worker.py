"""Trafilatura in an environment of its own: the worker that runs a pinned release (the arm's
`options.version`) other than the installed one, started by the arm's step (step.py) with that
environment's interpreter. It imports the standard library and Trafilatura only.

    <env>/bin/python -I worker.py KWARGS_JSON

One JSON value a line. The worker writes `{"trafilatura": VERSION}` once it has imported it, then
answers each HTML string it reads with `{"text": TEXT_OR_NULL}` (trafilatura.extract's result) or
`{"error": MESSAGE}`. It dies with the process that started it (a sandbox killed on a timeout).
"""

import json
import os
import signal
import sys
from importlib import metadata


def die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the worker ends when its input closes
        pass


def main() -> None:
    die_with_parent()
    # the answers get the real stdout; anything a library prints goes to stderr (the task's log)
    answers = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)
    from trafilatura import extract

    kwargs = json.loads(sys.argv[1])
    answers.write(json.dumps({"trafilatura": metadata.version("trafilatura")}) + "\n")
    answers.flush()
    for line in sys.stdin:
        try:
            answer = {"text": extract(json.loads(line), **kwargs)}
        except Exception as e:  # the step raises it in its own process: datatrove counts it
            answer = {"error": f"{type(e).__name__}: {e}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
