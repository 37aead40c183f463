"""One driver per output root (slurm.lock): a second is refused with the holder's name, a stale lock
is taken over with a message, the jobs a submission queued run under its claim."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_config
from slurm.lock import CLAIM_ENV, LOCK_FILE, DriverLocked, acquire, driving, release, take_over

RACER = """
import sys, time
from pathlib import Path
from slurm.lock import DriverLocked, acquire
try:
    acquire(Path(sys.argv[1]), print)
    print("won", flush=True)
    time.sleep(2)
except DriverLocked:
    print("refused", flush=True)
"""


def test_a_second_driver_is_refused_with_the_holder_s_name(tmp_path):
    mine = acquire(tmp_path, print)
    with pytest.raises(DriverLocked, match=rf"refused: {tmp_path} is driven by pid {os.getpid()} on .*, since "):
        acquire(tmp_path, print)
    release(tmp_path, mine)
    assert not (tmp_path / LOCK_FILE).exists()
    release(tmp_path, acquire(tmp_path, print))  # free again


def test_a_lock_whose_process_is_gone_is_taken_over_with_a_message(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder = {"host": socket.gethostname(), "pid": dead.pid, "started": "then", "command": "x"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(holder))
    said = []
    mine = acquire(tmp_path, said.append)
    assert said == [f"took over {tmp_path / LOCK_FILE}: its holder (pid {dead.pid} on {holder['host']}, since then (x)) is "
                    f"gone: pid {dead.pid} is not running on {holder['host']}"]
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    release(tmp_path, mine)


def test_a_job_of_a_submission_runs_under_its_claim(tmp_path, monkeypatch):
    mine = acquire(tmp_path, print)
    monkeypatch.setenv(CLAIM_ENV, "login1:123")
    with driving(tmp_path, print):  # no refusal, and the submission's lock stays
        pass
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == mine["pid"]


def test_of_drivers_started_together_exactly_one_runs(tmp_path):
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
              for _ in range(4)]
    outcomes = sorted(p.communicate(timeout=60)[0].strip() for p in racers)
    assert outcomes == ["refused", "refused", "refused", "won"]


def test_the_corpus_flow_is_refused_before_any_write_while_another_driver_runs(tmp_path):
    from corpus.flow.run import run_corpus

    (warc := tmp_path / "none.warc.gz").write_bytes(b"")
    config = make_config(tmp_path / "out", warc, {"a": {"extractor": "trafilatura"}})
    mine = acquire(config.output_root, print)
    with pytest.raises(DriverLocked, match="is driven by pid"):
        run_corpus(config)
    assert sorted(p.name for p in config.output_root.iterdir()) == [LOCK_FILE]
    release(config.output_root, mine)


def test_a_requeued_job_takes_over_the_lock_its_earlier_run_left(tmp_path, monkeypatch):
    (tmp_path / LOCK_FILE).write_text(json.dumps({"host": "node7", "pid": 1, "job_id": "4242", "started": "then"}))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # Slurm counts the requeues
    said = []
    release(tmp_path, acquire(tmp_path, said.append))
    assert said and said[0].endswith("is gone: it is this Slurm job (4242) before it was requeued")


def test_a_second_driver_in_the_same_allocation_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # salloc: two drivers in one job, no requeue between them
    mine = acquire(tmp_path, print)
    with pytest.raises(DriverLocked, match="Slurm job 4242"):
        acquire(tmp_path, print)
    release(tmp_path, mine)


def test_a_holder_whose_job_squeue_shows_ended_is_taken_over(tmp_path, monkeypatch):
    # squeue --jobs still lists an ended job (COMPLETED, CANCELLED...) for slurmctld's MinJobAge
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho CANCELLED\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    (root / LOCK_FILE).write_text(json.dumps({"host": "login2", "pid": 7, "job_id": "77", "started": "then"}))
    said = []
    release(root, acquire(root, said.append))
    assert said and said[0].endswith("is gone: Slurm job 77 has ended (CANCELLED)")


def test_a_taker_late_on_a_stale_lock_leaves_the_lock_another_took(tmp_path):
    # two takers read the same stale holder; the first takes over; the second must not remove its lock
    stale = json.dumps({"host": socket.gethostname(), "pid": 2**22 + 1, "started": "then"})
    (tmp_path / LOCK_FILE).write_text(stale)
    first = acquire(tmp_path, print)
    late_record = tmp_path / ".late"
    late_record.write_text("{}")
    assert not take_over(tmp_path / LOCK_FILE, stale, late_record)
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == first["pid"]
    release(tmp_path, first)


def test_a_driver_stopped_by_sigterm_releases_its_lock(tmp_path):
    import signal

    driver = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from slurm.lock import driving\nwith driving(Path(sys.argv[1]), print):\n"
                               "    print('driving', flush=True)\n    time.sleep(60)\n", str(tmp_path)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert driver.stdout.readline().strip() == "driving"
    assert (tmp_path / LOCK_FILE).is_file()
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=30) == 128 + signal.SIGTERM
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_link_whose_nfs_reply_was_lost_still_takes_the_lock(tmp_path, monkeypatch):
    link = os.link

    def link_then_eexist(source, target):  # the retransmitted link() fails: the first made it
        link(source, target)
        raise FileExistsError(17, "File exists", str(target))

    monkeypatch.setattr("slurm.lock.os.link", link_then_eexist)
    mine = acquire(tmp_path, print)
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == mine["pid"]
    release(tmp_path, mine)


def test_a_filesystem_without_hard_links_is_refused_saying_so(tmp_path, monkeypatch):
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted", str(target))

    monkeypatch.setattr("slurm.lock.os.link", no_links)
    with pytest.raises(DriverLocked, match="needs a filesystem with hard links"):
        acquire(tmp_path, print)
