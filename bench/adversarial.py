"""What a hostile page or record costs each arm and the reader: the worst case per arm, in CPU seconds.

    python -m bench.adversarial [--page-bytes 5000000] [--out bench/results/adversarial.json]

Generates the pathological input corpus (`pathological_pages`: runs of `<?`, `<!--` and `<` without an
end, elements nested 100,000 deep, one huge attribute, one huge line with no tag, invalid UTF-8 with NULs,
each `--page-bytes` long: the demo's `max_html_bytes`, the largest page the record guard lets through;
and `pathological_records`: a gzip bomb, a Content-Encoding bomb, a 1 MB WARC header line) and runs:

- every page through the reader's decoding and the record guard, then through each arm's work on a
  page: Trafilatura and the whole page (html2text), which run in the CPU-time sandbox (killed at
  their `timeout_s`), and the in-process parts of the block classifier (blocks and features: its
  trees cost a constant per block) and of Dripper (mineru-html's simplification and the mapping of
  labels back, every block labelled main; the labeler's cost is bounded by its context length), and
  the plain-text conversion of the whole page's Markdown;
- the records through the reader (corpus.read.warc.AccountedWarcReader, `on_corrupt: skip`): each
  refused record named with its reason.

CPU seconds of this process per page (`time.process_time`), each page under a wall-clock alarm of
`--hang-s` (a page past it is reported hung). Prints a table (worst case per arm, its page, the bound,
whether each stayed under) and writes JSON; exit status 1 when an arm passes its bound or hangs.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import multiprocessing
import platform
import resource
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# the demo's per-page limit (configs/local.yaml: trafilatura's timeout_s) is every arm's bound
BOUND_S = 10.0
DEEP = 100_000


class Hung(Exception):
    pass


def pathological_pages(size: int) -> dict[str, bytes]:
    """Each hostile page, about `size` bytes."""
    head, tail = b"<html><body>", b"</body></html>"
    fill = size - len(head) - len(tail)
    nested = b"<div>" * DEEP + b"deep text" + b"</div>" * DEEP
    return {
        "runs of <?": head + b"<?" * (fill // 2),
        "runs of <!--": head + b"<!--" * (fill // 4),
        "runs of <": head + b"<" * fill,
        "nested 100k deep": head + nested + tail,
        "one huge attribute": head + b'<p title="' + b"a" * (fill - 20) + b'">x</p>' + tail,
        "one line, no tag": head + b"lorem ipsum " * (fill // 12) + tail,
        "invalid UTF-8 and NULs": head + b"<p>" + b"\xff\xfe\x00\xc3(\x00\xed\xa0\x80" * ((fill - 7) // 9) + b"</p>" + tail,
    }


def _warc_record(uri: str, payload: bytes, http_headers: list[tuple[str, str]], writer, **warc_headers) -> None:
    from warcio.statusandheaders import StatusAndHeaders

    headers = StatusAndHeaders("200 OK", http_headers, protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(uri, "response", payload=io.BytesIO(payload), http_headers=headers,
                                                  warc_headers_dict=warc_headers))


def pathological_records(folder: Path, bomb_bytes: int = 1 << 30) -> dict[str, str]:
    """WARC files (one a case, gzip members) under `folder`: {case: file name}. Each file holds a normal
    page after the hostile record, so the reader is seen going on past it. `bomb_bytes`: what the
    Content-Encoding bomb inflates to."""
    from warcio.warcwriter import WARCWriter

    from corpus.read.framing import RECORD_MAX

    page = b"<html><body><p>an ordinary page after the hostile record</p></body></html>"
    html = [("Content-Type", "text/html; charset=utf-8")]
    cases = {}
    for case in ("gzip bomb", "Content-Encoding bomb", "1 MB header line"):
        name = case.replace(" ", "_").replace("-", "_").lower() + ".warc.gz"
        cases[case] = name
        with open(folder / name, "wb") as f:
            writer = WARCWriter(f, gzip=True)
            if case == "Content-Encoding bomb":  # zeros, gzip-encoded (1 GiB: about 1 MB on the wire)
                bomb = io.BytesIO()
                with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=9) as z:
                    for _ in range(bomb_bytes >> 20):
                        z.write(bytes(1 << 20))
                _warc_record("http://bomb.example/", bomb.getvalue(), [*html, ("Content-Encoding", "gzip")], writer)
            elif case == "1 MB header line":
                _warc_record("http://header.example/", page, html, writer, **{"X-Long": "a " * (1 << 19)})
            _warc_record("http://ok.example/", page, html, writer)
        if case == "gzip bomb":  # a member whose record declares more than RECORD_MAX bytes, all zeros
            head = f"WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: {2 * RECORD_MAX}\r\n\r\n".encode()
            bomb = gzip.compress(head + bytes(2 * RECORD_MAX) + b"\r\n\r\n", compresslevel=9)
            data = (folder / name).read_bytes()
            (folder / name).write_bytes(bomb + data)
    return cases


def cpu_seconds(work: Callable[[], object], hang_s: int) -> tuple[float | None, str | None]:
    """(CPU seconds `work` took, the error it raised or None); (None, "hung") when the wall-clock alarm
    of `hang_s` went off first. An error is how an arm refuses a page (the step counts it as clean_error)."""
    def alarm(*_):
        raise Hung

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(hang_s)
    started, error = time.process_time(), None
    try:
        work()
    except Hung:
        return None, "hung"
    except Exception as refused:  # any error is the page's outcome, reported
        error = f"{type(refused).__name__}: {str(refused)[:80]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return time.process_time() - started, error


def sandboxed_cpu_seconds(work: Callable[[str], object], text: str, hang_s: int) -> tuple[float | None, str | None]:
    """(CPU seconds, None) of `work(text)` in a forked process limited to BOUND_S seconds of CPU, as the
    extraction's CPU-time sandbox limits an arm's page: (BOUND_S, "timeout") where the limit killed it,
    (None, "hung") where the wall clock passed `hang_s`."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(BOUND_S), resource.RLIM_INFINITY))
        started = time.process_time()
        work(text)
        send.send(time.process_time() - started)

    process = context.Process(target=child)
    process.start()
    process.join(hang_s)
    if process.is_alive():
        process.kill()
        process.join()
        return None, "hung"
    if receive.poll():
        return receive.recv(), None
    return BOUND_S, "timeout" if process.exitcode == -signal.SIGXCPU else f"exit status {process.exitcode}"


def arms() -> dict[str, tuple[str, Callable[[str], object]]]:
    """{arm: (where it runs, its work on one decoded page)}."""
    from datatrove.data import Document

    from corpus.extractors.baselines.steps import WholePage
    from corpus.extractors.block_classifier.blocks import page_blocks
    from corpus.extractors.block_classifier.features import page_features
    from corpus.extractors.dripper.step import DripperPage, main_html_from_labels
    from corpus.extractors.plain import plain_text
    from corpus.extractors.trafilatura import TrafilaturaOptions
    from corpus.extractors.trafilatura.step import Trafilatura

    trafilatura = Trafilatura(TrafilaturaOptions(output_format="markdown", favour_precision=True, timeout_s=BOUND_S))

    def block_classifier(html: str):
        blocks = page_blocks(html)
        return page_features(blocks) if blocks else None

    def dripper(html: str):  # the step's simplification; a page it refuses goes to the sandboxed fallback
        page = DripperPage(Document(text=html, id="page"))
        page.simplify()
        if page.error is not None:
            raise ValueError(f"{page.error}: to the fallback (Trafilatura, sandboxed)")
        return main_html_from_labels(page.map_html, {i: "main" for i in page.item_ids})

    return {
        "trafilatura": ("sandbox", trafilatura.extract),
        "whole_page": ("sandbox", WholePage().extract_page),
        "block_classifier": ("in-process", block_classifier),
        "dripper": ("in-process", dripper),
        "plain_text": ("in-process", plain_text),  # a hostile page taken for an arm's Markdown
    }


def run_pages(size: int, hang_s: int) -> list[dict]:
    from datatrove.data import Document

    from corpus.extractors.prefilters import RecordGuard
    from corpus.read.warc import decode_html

    guard = RecordGuard(max_html_bytes=5_000_000, max_control_char_ratio=0.01)
    rows, work = [], arms()
    for _, extract in work.values():  # imports and first-call set-up are no page's cost
        extract("<html><body><p>warm up</p></body></html>")
    for page, payload in pathological_pages(size).items():
        decoded = {}
        seconds, error = cpu_seconds(lambda payload=payload, decoded=decoded:
                                     decoded.update(text=decode_html(payload, "text/html")[0]), hang_s)
        rows.append({"arm": "reader (decode)", "where": "in-process", "page": page, "bytes": len(payload), "cpu_s": seconds,
                     "dropped": error})
        text = decoded.get("text")
        doc = Document(text=text or "", id=page, metadata={"mime": "text/html", "payload_bytes": len(payload),
                                                            "decoded": text is not None})
        verdict = guard.filter(doc)
        reason = verdict[1] if isinstance(verdict, tuple) else None
        for arm, (where, extract) in work.items():
            row = {"arm": arm, "where": where, "page": page, "bytes": len(payload), "dropped": reason, "cpu_s": 0.0}
            if reason is None and where == "sandbox":
                row["cpu_s"], row["dropped"] = sandboxed_cpu_seconds(extract, doc.text, hang_s)
            elif reason is None:
                row["cpu_s"], error = cpu_seconds(lambda extract=extract, text=doc.text: extract(text), hang_s)
                row["dropped"] = error
            rows.append(row)
            print(f"  {arm:<17} {page:<24} {row['cpu_s'] if row['cpu_s'] is not None else 'HUNG'} {row['dropped'] or ''}",
                  flush=True)
    return rows


def run_records(hang_s: int) -> list[dict]:
    from corpus.read.warc import AccountedWarcReader

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case, name in pathological_records(folder).items():
            reader = AccountedWarcReader(str(folder), on_corrupt="skip")
            reader.files = {}
            docs = []
            seconds, error = cpu_seconds(lambda reader=reader, name=name, docs=docs: docs.extend(reader.read_file(name)),
                                         hang_s)
            entry = reader.files.get(name, {})
            rows.append({"arm": "reader (records)", "where": "in-process", "page": case,
                         "bytes": (folder / name).stat().st_size, "cpu_s": seconds, "dropped": error,
                         "refused": [d["reason"] for d in entry.get("damage", [])],
                         "documents": [{"url": d.metadata["url"], "payload_bytes": d.metadata["payload_bytes"],
                                        "payload_truncated": d.metadata["payload_truncated"]} for d in docs]})
            print(f"  reader (records)  {case:<24} {seconds}", flush=True)
    return rows


def worst_cases(rows: list[dict]) -> list[dict]:
    worst = {}
    for row in rows:
        seconds = float("inf") if row["cpu_s"] is None else row["cpu_s"]
        if row["arm"] not in worst or seconds > worst[row["arm"]]["cpu_s"]:
            worst[row["arm"]] = {"arm": row["arm"], "where": row["where"], "page": row["page"], "cpu_s": seconds,
                                 "bound_s": BOUND_S, "under": seconds <= BOUND_S}
    return list(worst.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.adversarial",
        description="Runs the generated pathological pages and WARC records through every arm and the reader and "
                    "prints each one's worst case in CPU seconds against its bound; writes JSON (--out).")
    parser.add_argument("--page-bytes", type=int, default=5_000_000, help="size of each hostile page (default: the "
                        "demo's max_html_bytes, 5,000,000)")
    parser.add_argument("--hang-s", type=int, default=300, help="wall-clock seconds after which a page counts as hung "
                        "(on a loaded machine a sandboxed page's 10 CPU seconds can take minutes: raise it)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/adversarial.json"))
    args = parser.parse_args(argv)

    print(f"pathological pages of {args.page_bytes:,} bytes, then records; CPU seconds of this process")
    rows = run_pages(args.page_bytes, args.hang_s) + run_records(args.hang_s)
    worst = worst_cases(rows)
    print(f"\n{'arm':<18} {'runs':<11} {'worst page':<24} {'CPU s':>8} {'bound s':>8}  under")
    for w in worst:
        print(f"{w['arm']:<18} {w['where']:<11} {w['page']:<24} {w['cpu_s']:>8.2f} {w['bound_s']:>8.1f}  {w['under']}")
    for row in rows:
        if row.get("refused") is not None:
            print(f"reader: {row['page']}: refused {row['refused'] or 'nothing'}, documents "
                  f"{[(d['url'], d['payload_bytes'], d['payload_truncated']) for d in row['documents']]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"page_bytes": args.page_bytes, "machine": platform.processor() or platform.machine(),
                                    "command": "python -m bench.adversarial", "worst": worst, "rows": rows}, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0 if all(w["under"] for w in worst) else 1


if __name__ == "__main__":
    raise SystemExit(main())
