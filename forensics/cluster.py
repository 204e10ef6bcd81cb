"""Run a batch's units on a Dask cluster instead of the local process pool.

``forensics batch … --cluster tcp://scheduler:8786`` (or ``--cluster local:N``, a
``LocalCluster`` of N worker processes on this machine) hands the same ``Unit``s to Dask tasks
that the local pool hands to its processes; each task runs ``forensics.batch._process`` on a
small chunk of units and sends back the same ``UnitOutcome``s, so the tables, index and case
studies are byte-identical to a local batch's. What crosses the network: unit descriptions
(paths, URLs, archive member names and offsets, never transcript bytes), the settings (a few
hundred bytes per task) and the compact outcome rows. Workers open their units themselves (a
shared filesystem or fsspec URLs) and write case studies into OUT, which they must reach.

In flight at once: four chunks per worker, fed from the unit listing as tasks finish
(``distributed.as_completed``), so millions of units never become millions of futures. The
workers are counted again every few seconds, so workers that join a batch already running (an
autoscaled cluster, SLURM jobs leaving the queue) get work too.

Faults, as in the local pool: a worker that dies is replaced by its nanny; the units of the
chunk it held are retried one at a time on an otherwise idle cluster, and a unit that kills a
worker on its own is reported failed. A scheduler that goes away raises
``forensics.batch.ExecutorLost``: the batch writes what was done, and a rerun continues.

Dask is optional: ``pip install 'forensics[dask]'``.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from forensics import __version__, batch
from forensics.archive import DEFAULT_LIMITS, Problem, Unit, archive_units, iter_units
from forensics.config import Config
from forensics.errors import ForensicsError
from forensics.remote import is_url

INSTALL = "pip install 'forensics[dask]'"
CONNECT_TIMEOUT = "20s"
CHUNKS_PER_WORKER = 4
RECOUNT_S = 2.0
"""Seconds between two counts of the workers while a batch runs (the window grows with them)."""
MAX_CHUNK = 32
"""Units per task at most: a task costs the scheduler and this process a few milliseconds
(docs/scaling.md), a unit tens of milliseconds on a worker, so big batches on many workers
take bigger chunks than the local pool's 8."""


class ClusterUnavailable(ForensicsError):
    """Dask is not installed, or the scheduler cannot be reached or has no workers."""


@dataclass(frozen=True)
class ClusterSpec:
    """What ``--cluster`` names: a scheduler address, or a LocalCluster of ``workers``."""

    address: str | None = None
    workers: int | None = None

    @classmethod
    def parse(cls, text: str) -> ClusterSpec:
        """``tcp://host:port`` (any Dask address), ``local`` or ``local:N``."""
        local = re.fullmatch(r"local(?::(\d+))?", text.strip())
        if local:
            n = int(local.group(1)) if local.group(1) else None
            if n == 0:
                raise ClusterUnavailable("--cluster local:N needs N >= 1")
            return cls(workers=n or batch.default_workers())
        if "://" not in text:
            raise ClusterUnavailable(f"--cluster {text!r}: give a scheduler address "
                                     "(tcp://host:8786) or local[:N]")
        return cls(address=text.strip())


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterUnavailable(f"--cluster needs the dask extra: {INSTALL}") from None
    return distributed


@contextmanager
def dask_executor(spec: str | ClusterSpec, *,
                  timeout: str = CONNECT_TIMEOUT) -> Iterator[DaskExecutor]:
    """A connected ``DaskExecutor``; a LocalCluster is started for ``local[:N]`` (on
    127.0.0.1, no dashboard) and shut down on exit, as is the client. ``timeout``: how long
    to try reaching the scheduler and to wait for its first worker."""
    distributed = _distributed()
    import dask

    spec = ClusterSpec.parse(spec) if isinstance(spec, str) else spec
    cluster = None
    client = None
    try:
        if spec.address is None:
            # A task whose worker dies is not rescheduled by the scheduler: this module retries
            # it alone, so a deadly unit costs one more worker, as in the local pool.
            with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                cluster = distributed.LocalCluster(
                    n_workers=spec.workers, threads_per_worker=1, processes=True,
                    host="127.0.0.1", dashboard_address=None, silence_logs=logging.ERROR,
                    # Its health page on any free loopback port, not 8787 (often taken).
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
            client = distributed.Client(cluster, timeout=timeout)
        else:
            try:
                client = distributed.Client(spec.address, timeout=timeout)
            except (OSError, TimeoutError) as exc:
                raise ClusterUnavailable(
                    f"cannot reach the Dask scheduler at {spec.address}: {exc}") from None
        try:
            client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError):
            raise ClusterUnavailable(f"the Dask scheduler at {spec.address or 'local'} has "
                                     f"no workers (waited {timeout})") from None
        yield DaskExecutor(client, address=spec.address or "local")
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        _restore_client_logs()


@dataclass(frozen=True)
class WorkerSettings:
    """What every task needs besides its units; a worker sets itself up once per value."""

    config: Config
    cases_dir: str | None
    options: dict[str, Any]
    """``forensics.batch._init_worker``'s: redaction, case-study share, archive limits."""
    batch_id: str = ""
    """New for every batch, so a long-lived worker starts each one afresh: its share of case
    studies full again, its open zip files (which may have changed since) closed."""


def check_worker(cases_dir: str | None) -> str:
    """Run on every worker before a batch: what it runs (``forensics X``), or why it cannot
    run this batch's tasks (no filesystem for the case studies' URL, OUT not mounted)."""
    from forensics import __version__

    if cases_dir and is_url(cases_dir):
        from forensics.destination import OutputUnavailable, filesystem

        try:
            filesystem(cases_dir)
        except OutputUnavailable as exc:
            return f"cannot write case studies to {exc}"
    elif cases_dir and not os.path.isdir(os.path.dirname(cases_dir)):
        # The batch made OUT before asking: a worker that does not see it has no shared mount.
        return (f"cannot see OUT at {os.path.dirname(cases_dir)}: mount it at the same path "
                "on every worker, or give OUT as a URL")
    return f"forensics {__version__}"


def run_chunk(settings: WorkerSettings, chunk: list[batch.Item],
              member_hashes: dict[str, str]) -> tuple[list[batch.UnitOutcome], list[Problem]]:
    """The task: outcomes of a chunk of units, read and scanned on this worker. An ``archive``
    unit (a compressed tar) is listed and read here, its members' previous hashes in
    ``member_hashes``; what could not be listed comes back as problems."""
    if batch._worker.get("settings") != settings:
        batch._init_worker(settings.config, settings.cases_dir, settings.options)
        batch._worker["settings"] = settings
    outcomes: list[batch.UnitOutcome] = []
    problems: list[Problem] = []
    for unit, prev_hash in chunk:
        if unit.kind == "archive":
            limits = settings.options.get("limits", DEFAULT_LIMITS)
            for member in archive_units(unit.path, problems, limits):
                outcomes.append(batch._process(member, member_hashes.get(member.label)))
        else:
            outcomes.append(batch._process(unit, prev_hash))
    return outcomes, problems


class DaskExecutor:
    """``forensics.batch.Executor`` over a ``distributed.Client``."""

    def __init__(self, client: Any, *, address: str = "") -> None:
        self.client = client
        self.address = address or getattr(client.scheduler, "address", "") or "?"
        self.workers = max(1, len(client.scheduler_info().get("workers", {})))
        self._problems: list[Problem] = []
        self._keys = itertools.count()

    def list_units(self, paths, problems: list[Problem], *, exclude,
                   limits=DEFAULT_LIMITS) -> Iterator[Unit]:
        """As the local pool lists them, except that compressed tars stay whole (the main
        process never decompresses transcripts); their problems arrive while running."""
        self._problems = problems
        return iter_units(paths, problems, exclude=exclude, limits=limits, defer_streams=True)

    def run(self, items: Iterator[batch.Item], *, total: int | None, config: Config,
            cases_dir: str | None, options: dict[str, Any], known: dict[str, dict[str, str]],
            take: Callable[[batch.UnitOutcome], None]) -> None:
        distributed = _distributed()
        if cases_dir and not is_url(cases_dir):
            cases_dir = os.path.abspath(cases_dir)
        self._check_workers(cases_dir)  # and counts them: more may have joined since
        size = 4 if total is None else max(1, min(MAX_CHUNK, total // (self.workers * 16)))
        counted = time.monotonic()
        # A few hundred bytes, sent with every task: scattered data would be lost with the
        # worker holding it, taking the tasks that need it along.
        settings = WorkerSettings(config, cases_dir, options, batch_id=uuid.uuid4().hex)
        chunks = _chunks(items, size)
        retry: deque[batch.Item] = deque()
        in_flight: dict[str, tuple[list[batch.Item], bool]] = {}
        done = distributed.as_completed()

        def submit(chunk: list[batch.Item], alone: bool) -> None:
            try:
                fut = self.client.submit(run_chunk, settings, chunk,
                                         _member_hashes(chunk, known), pure=False,
                                         key=f"forensics-units-{next(self._keys)}")
            except (OSError, TimeoutError, distributed.comm.CommClosedError) as exc:
                raise batch.ExecutorLost(self._gone(exc)) from None
            in_flight[fut.key] = (chunk, alone)
            done.add(fut)

        exhausted = False
        while True:
            if retry:
                # Retried units run one at a time on an idle cluster, so a unit that kills its
                # worker again is known for sure.
                if not in_flight:
                    submit([retry.popleft()], True)
            else:
                if time.monotonic() - counted > RECOUNT_S:  # workers join an autoscaled cluster
                    self.workers, counted = self._count_workers(), time.monotonic()
                while not exhausted and len(in_flight) < self.workers * CHUNKS_PER_WORKER:
                    chunk = next(chunks, None)
                    if chunk is None:
                        exhausted = True
                    else:
                        submit(chunk, False)
            if not in_flight:
                return
            fut = next(done)
            chunk, alone = in_flight.pop(fut.key)
            try:
                outcomes, problems = fut.result()
            except distributed.KilledWorker:
                if alone:
                    take(batch.worker_died(chunk[0][0]))
                else:
                    retry.extend(chunk)
                continue
            except (Exception, CancelledError) as exc:
                if fut.status == "error":  # the task raised: a worker set up unlike this one
                    raise batch.ExecutorLost(
                        f"a Dask worker could not run forensics' task ({type(exc).__name__}: "
                        f"{_first_line(exc)}); every worker needs forensics {__version__} "
                        f"({INSTALL}) and the batch's files at the same paths") from None
                # A cancelled future or a closed connection: the scheduler is gone.
                raise batch.ExecutorLost(self._gone(exc)) from None
            finally:
                fut.release()
            for outcome in outcomes:
                take(outcome)
            self._problems.extend(problems)

    def _check_workers(self, cases_dir: str | None) -> None:
        """Every worker runs this forensics and reaches the case studies' URL: a worker set
        up otherwise would fail every task or silently write no case study."""
        distributed = _distributed()
        try:
            answers = self.client.run(check_worker, cases_dir)
        except (OSError, TimeoutError, distributed.comm.CommClosedError) as exc:
            raise batch.ExecutorLost(self._gone(exc)) from None
        except Exception as exc:  # the workers could not even unpickle the check
            raise ClusterUnavailable(f"the Dask workers cannot run forensics "
                                     f"({_first_line(exc)}): install forensics "
                                     f"{__version__} with {INSTALL} on every worker") from None
        self.workers = max(1, len(answers))
        mine = f"forensics {__version__}"
        for address, answer in sorted(answers.items()):
            if answer != mine:
                why = answer if answer.startswith("cannot") else f"runs {answer}, this " \
                    f"machine {mine}"
                raise ClusterUnavailable(f"the Dask worker at {address} {why}")

    def _count_workers(self) -> int:
        """The workers the scheduler has now; the last count when it cannot tell."""
        try:
            try:
                info = self.client.scheduler_info(n_workers=0)  # totals only: a small answer
            except TypeError:  # distributed before 2025 has no n_workers
                info = self.client.scheduler_info()
        except Exception:  # the scheduler is going: the next submit says so
            return self.workers
        return max(1, info.get("n_workers") or len(info.get("workers", ())) or self.workers)

    def _gone(self, exc: BaseException) -> str:
        # The client's reconnect loop would log tracebacks while it gives up: the message
        # below says it all.
        _quiet_client()
        why = "connection lost" if isinstance(exc, CancelledError) else _first_line(exc)
        return f"lost the Dask scheduler at {self.address} ({why})"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


_CLIENT_LOGGERS = ("distributed.client", "distributed.comm", "distributed.core",
                   "distributed.utils")


_saved_levels: dict[str, int] = {}


def _quiet_client() -> None:
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        _saved_levels.setdefault(name, logger.level)
        logger.setLevel(logging.CRITICAL + 1)


def _restore_client_logs() -> None:
    while _saved_levels:
        name, level = _saved_levels.popitem()
        logging.getLogger(name).setLevel(level)


def _chunks(items: Iterator[batch.Item], size: int) -> Iterator[list[batch.Item]]:
    while chunk := list(itertools.islice(items, size)):
        yield chunk


def _member_hashes(chunk: list[batch.Item], known: dict[str, dict[str, str]]) -> dict[str, str]:
    """For the compressed tars in ``chunk``: their members' hashes from the last run."""
    out: dict[str, str] = {}
    for unit, _prev in chunk:
        if unit.kind == "archive":
            prefix = unit.label + "!"
            out.update((label, entry["hash"]) for label, entry in known.items()
                       if label.startswith(prefix) and entry.get("hash"))
    return out
