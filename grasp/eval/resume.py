"""What an evaluation folder already holds, and who may write to it.

An evaluation appends one line per episode to ``trajectories.jsonl`` and resumes from it, so
the file must say, for every episode, one thing: the answer it counts. Two things can break
that, and both are handled here.

- Two processes writing one folder would both roll out every question and append twice as
  many lines. ``locked(folder)`` holds an exclusive ``flock`` on ``folder/.lock`` for as long
  as an evaluation writes there; a second one is refused at once, naming the holder. The
  kernel drops the lock when its process dies, so a ``kill -9`` never leaves a stale lock.
  ``hold_lock`` is that lock for any folder (a training run's too: grasp/train/resume.py).
- An episode may have several lines: a generation error (the backend failed: HTTP 5xx, no
  server, out of memory) is not an answer, so a resumed run rolls that episode out again and
  appends its new line; and a file may hold a repeated line (copied, concatenated, or written
  by two processes before this lock existed). ``collect`` keeps one trajectory per episode:
  the first that did not end in a generation error, else the last that did. Repeats of a
  finished episode are counted and dropped, never averaged in.

``write_atomic`` writes the folder's whole files (config.json, results.json, results.md), so
that none is ever left half-written.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from grasp.rollout.trajectory import Trajectory
from grasp.types import Question, StopReason

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
"""Held (``flock``) by the process writing the folder (an evaluation, a training run); it
names its holder."""


class FolderLockedError(RuntimeError, BlockingIOError):
    """Another process holds a folder's lock (``hold_lock``); the message names it.

    A BlockingIOError, as ``flock``'s own refusal is: a path another process holds, which the
    entry points end in one line (grasp/startup.py)."""


class EvaluationLockedError(FolderLockedError):
    """Another process is writing the evaluation folder."""


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the folder's lock for the block; EvaluationLockedError when another process does.

    ``flock`` is advisory and local: it does not protect a folder shared over NFS by two
    machines.
    """
    folder.mkdir(parents=True, exist_ok=True)

    def refusal(holder: str, path: Path) -> FolderLockedError:
        return EvaluationLockedError(
            f"{folder} is being written by another evaluation ({holder}; lock {path}): "
            "wait for it to finish, or choose another out="
        )

    with hold_lock(folder / LOCK_FILE, refusal):
        yield


_LOCK_ATTEMPTS = 8
"""Tries at a lock file that its last holder removes as we open it (``hold_lock(remove=True)``)."""


@contextmanager
def hold_lock(
    path: Path,
    refusal: Callable[[str, Path], FolderLockedError],
    remove: bool = False,
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if absent) for the block, naming this
    process in it; ``refusal(holder, path)`` is raised at once when another process holds it
    (``holder``: what that process wrote there).

    The kernel drops the lock of a process that dies, so the file a killed holder leaves
    blocks nothing: the next process locks it and writes its own name. With ``remove``, the
    file is deleted as the lock is let go, so a folder keeps no trace of it; a process that
    opened the file just before then finds it unlinked after locking it, and locks the one at
    ``path`` instead."""
    for _ in range(_LOCK_ATTEMPTS):
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "a process that has not named itself yet"
            handle.close()
            raise refusal(holder, path) from None
        if _is_at(handle.fileno(), path):
            break
        handle.close()  # removed by its last holder as it let go: lock the file there now
    else:
        raise refusal("processes that keep taking and removing it", path)
    handle.seek(0)
    handle.truncate()
    since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {since}\n")
    handle.flush()
    try:
        yield
    finally:
        if remove:
            path.unlink(missing_ok=True)  # before the lock goes: see the docstring
        handle.close()  # closing the descriptor releases the lock


def _is_at(descriptor: int, path: Path) -> bool:
    """True when the open file ``descriptor`` is the file at ``path`` (not one removed)."""
    try:
        linked = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (linked.st_dev, linked.st_ino)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (or a killed writer) never leaves half of
    it: the text goes to a temporary file beside it, which then replaces ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def failed(trajectory: Trajectory) -> bool:
    """True when the episode ended because the backend failed, not with an answer of its own."""
    return trajectory.stop_reason == StopReason.GENERATION_ERROR


@dataclass
class FinishedEpisodes:
    """One trajectory per episode id, by ``collect``'s rule, in the order first seen."""

    by_episode: dict[str, Trajectory] = field(default_factory=dict)
    repeated: int = 0
    """Lines dropped because their episode already had a trajectory that counts."""

    def add(self, trajectory: Trajectory) -> bool:
        """Keep ``trajectory`` unless its episode has one that counts; True when kept."""
        kept = self.by_episode.get(trajectory.episode_id)
        if kept is not None and not failed(kept):
            self.repeated += 1
            return False
        self.by_episode[trajectory.episode_id] = trajectory
        return True

    @property
    def trajectories(self) -> list[Trajectory]:
        return list(self.by_episode.values())

    def done_question_ids(self, group_size: int) -> set[str]:
        """Questions whose ``group_size`` samples all ended without a generation error."""
        samples: dict[str, set[int]] = {}
        for t in self.by_episode.values():
            if not failed(t):
                samples.setdefault(t.question_id, set()).add(t.sample_index)
        wanted = set(range(group_size))
        return {qid for qid, indices in samples.items() if wanted <= indices}

    def for_questions(self, questions: Sequence[Question]) -> list[Trajectory]:
        """The kept trajectories of ``questions``' episodes."""
        wanted = {q.question_id for q in questions}
        return [t for t in self.by_episode.values() if t.question_id in wanted]


def collect(trajectories: Iterable[Trajectory]) -> FinishedEpisodes:
    """One trajectory per episode: the first that counts, else the last generation error."""
    finished = FinishedEpisodes()
    for trajectory in trajectories:
        finished.add(trajectory)
    return finished
