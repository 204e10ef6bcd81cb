"""The batch tables as parquet datasets partitioned by agent and month, for lazy readers.

``OUT/incidents/agent=claude-code/month=2026-01/00000000.parquet`` (and ``OUT/sessions/…``):
hive-style folders that ``polars.scan_parquet(OUT / "incidents")`` and DuckDB's
``read_parquet('OUT/incidents/**/*.parquet', hive_partitioning = true)`` read lazily, pruning
the agents and months a query does not ask for. ``month`` (``YYYY-MM`` of the session start,
UTC) is the one column the single files do not have; sessions without a start or an agent go
to the ``__HIVE_DEFAULT_PARTITION__`` folder, which both readers read back as null.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

PARTITIONED_TABLES = ("incidents", "sessions")
PARTITION_BY = ("agent", "month")


def write_partitioned(tables: dict[str, pl.DataFrame], out: Path) -> list[Path]:
    """Write each table's dataset folder under ``out``, replacing the last run's (a partition
    that has no rows any more must not linger). Returns the folders."""
    import polars as pl

    written = []
    for name in PARTITIONED_TABLES:
        folder = out / name
        if folder.is_dir():
            shutil.rmtree(folder)
        df = tables[name].with_columns(month=pl.col("started").dt.strftime("%Y-%m"))
        if df.height:
            df.write_parquet(folder, partition_by=list(PARTITION_BY))
        else:
            folder.mkdir()
        written.append(folder)
    return written
