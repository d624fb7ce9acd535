"""The store's schema, as numbered, append-only migrations recorded in `schema_migrations`.

Never edit a migration that has shipped: add the next number. Opening a store for writing
applies what is missing, in order, each in its own transaction, then checkpoints so the new
schema is in the main file rather than the write-ahead log. A store whose newest migration
is unknown to this version was written by a newer agentbench and is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from agentbench._version import __version__
from agentbench.trace.errors import StoreFormatError, damaged
from agentbench.trace.storage.faults import roll_back


@dataclass(frozen=True)
class Migration:
    id: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "trace tables",
        """
        CREATE TABLE store_meta (key VARCHAR PRIMARY KEY, value VARCHAR);
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            parent_run_id VARCHAR,
            eval_id VARCHAR,
            case_id VARCHAR,
            trial BIGINT,
            agent VARCHAR NOT NULL,
            model VARCHAR,
            input VARCHAR,
            output VARCHAR,
            status VARCHAR NOT NULL,
            stop_reason VARCHAR,
            error VARCHAR,
            started_at TIMESTAMPTZ NOT NULL,
            finished_at TIMESTAMPTZ,
            duration_ms DOUBLE,
            iterations BIGINT,
            llm_calls BIGINT,
            tool_calls BIGINT,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost_usd DOUBLE,
            code_version VARCHAR,
            context VARCHAR
        );
        CREATE TABLE llm_calls (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            step BIGINT,
            purpose VARCHAR NOT NULL,
            ts TIMESTAMPTZ NOT NULL,
            model VARCHAR,
            request_diff VARCHAR NOT NULL,
            request_hash VARCHAR NOT NULL,
            messages BIGINT NOT NULL,
            messages_added BIGINT NOT NULL,
            messages_dropped BIGINT NOT NULL,
            response VARCHAR,
            finish_reason VARCHAR,
            input_tokens BIGINT,
            output_tokens BIGINT,
            latency_ms DOUBLE,
            attempts BIGINT
        );
        CREATE TABLE tool_calls (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            step BIGINT,
            ts TIMESTAMPTZ NOT NULL,
            call_id VARCHAR NOT NULL,
            tool VARCHAR NOT NULL,
            arguments VARCHAR,
            result_kind VARCHAR,
            result VARCHAR,
            error VARCHAR,
            effect VARCHAR,
            duration_ms DOUBLE,
            truncated BOOLEAN,
            stops_run BOOLEAN
        );
        CREATE TABLE context_diffs (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            step BIGINT,
            ts TIMESTAMPTZ NOT NULL,
            scope VARCHAR NOT NULL,
            key VARCHAR NOT NULL,
            op VARCHAR NOT NULL,
            old VARCHAR,
            new VARCHAR
        );
        CREATE TABLE events (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            step BIGINT,
            ts TIMESTAMPTZ NOT NULL,
            kind VARCHAR NOT NULL,
            payload VARCHAR NOT NULL
        );
        INSERT INTO store_meta VALUES ('format', 'agentbench-traces');
        """,
    ),
    Migration(
        2,
        "replays and evals",
        """
        ALTER TABLE runs ADD COLUMN replay_of VARCHAR;
        CREATE TABLE evals (
            eval_id VARCHAR PRIMARY KEY,
            suite VARCHAR NOT NULL,
            started_at TIMESTAMPTZ NOT NULL,
            finished_at TIMESTAMPTZ,
            status VARCHAR NOT NULL,
            code_version VARCHAR,
            model VARCHAR,
            config VARCHAR,
            summary VARCHAR
        );
        CREATE TABLE results (
            eval_id VARCHAR NOT NULL,
            suite VARCHAR NOT NULL,
            case_id VARCHAR NOT NULL,
            trial BIGINT NOT NULL,
            run_id VARCHAR,
            status VARCHAR NOT NULL,
            passed BOOLEAN NOT NULL,
            score DOUBLE,
            scores VARCHAR,
            duration_ms DOUBLE,
            tokens BIGINT,
            cost_usd DOUBLE,
            error VARCHAR,
            source VARCHAR,
            tags VARCHAR,
            recorded_at TIMESTAMPTZ NOT NULL
        );
        """,
    ),
    Migration(
        3,
        "every event rebuilds exactly",
        # Where the second event of a pair landed (a model call's response, a tool call's
        # finish) and the run's last event: with these, the typed events a run emitted are
        # rebuilt from its rows with their own seq and time (`agentbench.replay.stored_events`).
        """
        ALTER TABLE llm_calls ADD COLUMN response_seq BIGINT;
        ALTER TABLE llm_calls ADD COLUMN response_ts TIMESTAMPTZ;
        ALTER TABLE tool_calls ADD COLUMN finished_seq BIGINT;
        ALTER TABLE tool_calls ADD COLUMN finished_ts TIMESTAMPTZ;
        ALTER TABLE runs ADD COLUMN finished_seq BIGINT;
        """,
    ),
    Migration(
        4,
        "results keep what replay saw and every turn",
        # JSON: {"drifts": [...], "divergences": [...], "turn_runs": [...]} — requests that
        # differed from the recording and where the run first behaved differently from it
        # (kept even when drift is allowed, so it is reported whether or not it failed the
        # case), and the root run of each turn of a multi-turn case.
        """
        ALTER TABLE results ADD COLUMN details VARCHAR;
        """,
    ),
    Migration(
        5,
        "estimated usage is marked",
        # True when some of a run's tokens were counted by agentbench because the server
        # reported none (llama.cpp's streams): such totals are estimates, never silent zeros.
        """
        ALTER TABLE runs ADD COLUMN usage_estimated BOOLEAN;
        """,
    ),
    Migration(
        6,
        "served requests are labelled",
        # `agentbench serve`: each run of a request carries the HTTP request id, the client's
        # conversation id and the agent reference served, so production traffic is found
        # (`traces list --conversation`) and replayed without naming the agent again.
        """
        ALTER TABLE runs ADD COLUMN request_id VARCHAR;
        ALTER TABLE runs ADD COLUMN conversation_id VARCHAR;
        ALTER TABLE runs ADD COLUMN agent_ref VARCHAR;
        """,
    ),
    Migration(
        7,
        "imported runs say where they came from",
        # `agentbench traces import-otel`: a run made from another program's OpenTelemetry
        # spans keeps its file, trace id and instrumentation, and — when its spans carried no
        # message content — why it cannot be replayed, which `promote` refuses on.
        """
        ALTER TABLE runs ADD COLUMN origin VARCHAR;
        ALTER TABLE runs ADD COLUMN not_replayable VARCHAR;
        """,
    ),
    Migration(
        8,
        "served runs name their caller",
        # `agentbench serve` with keys: the name of the key a run was started with (never the
        # key), so a caller sees only its own runs, after a restart too.
        """
        ALTER TABLE runs ADD COLUMN caller VARCHAR;
        """,
    ),
    Migration(
        9,
        "a step names its agent when it is not its run's",
        # A boundary target's framework can hand off between agents inside one call of the
        # function (one run): each row then says which agent it was. NULL: the run's agent
        # (always so for the runtime, where a handoff starts a child run).
        """
        ALTER TABLE llm_calls ADD COLUMN agent VARCHAR;
        ALTER TABLE tool_calls ADD COLUMN agent VARCHAR;
        ALTER TABLE context_diffs ADD COLUMN agent VARCHAR;
        ALTER TABLE events ADD COLUMN agent VARCHAR;
        """,
    ),
)
LATEST = MIGRATIONS[-1].id
MARKER_TABLE = "schema_migrations"
_CREATED = re.compile(r"CREATE TABLE (\w+)")


def applied(conn: duckdb.DuckDBPyConnection, tables: set[str] | None = None) -> int:
    """The newest migration applied to this database; 0 for a new, empty one (`tables`: its
    tables, when the caller has listed them already)."""
    if tables is None:
        tables = _table_names(conn)
    if MARKER_TABLE not in tables:
        return 0 if not tables else -1
    row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {MARKER_TABLE}").fetchone()
    return int(row[0]) if row else 0


def _table_names(conn: duckdb.DuckDBPyConnection) -> set[str]:
    # Of the store only: a writer's connection also has an (empty) in-memory catalog.
    rows = conn.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
    ).fetchall()
    return {row[0] for row in rows}


def tables_of(version: int) -> set[str]:
    """The tables a store at migration `version` has (read from the migrations' SQL)."""
    made = {MARKER_TABLE} if version > 0 else set()
    for migration in MIGRATIONS[:version]:
        made.update(_CREATED.findall(migration.sql))
    return made


def check(conn: duckdb.DuckDBPyConnection, path: Path) -> int:
    """The applied migration number, or StoreFormatError for foreign and newer stores and
    StoreDamagedError for one of ours with a table gone."""
    # One listing serves both questions: each statement costs DuckDB about a millisecond,
    # and this runs at every opening of the store for writing.
    names = _table_names(conn)
    version = applied(conn, names)
    tables = sorted(names)
    if version < 0 and {"store_meta", "runs"} <= set(tables):
        raise damaged(path, f"its {MARKER_TABLE} table is missing (it has {', '.join(tables)})")
    if 0 <= version <= LATEST:
        missing = sorted(tables_of(version) - set(tables))
        if missing:
            raise damaged(
                path,
                f"table(s) {', '.join(missing)} are missing (schema {version} has "
                f"{', '.join(sorted(tables_of(version)))})",
            )
    if version < 0:
        raise StoreFormatError(
            f"{path} is a DuckDB database but not an agentbench trace store: it has no "
            f"{MARKER_TABLE} table (tables found: {', '.join(tables[:8])}); "
            "point --db / AGENTBENCH_DB at a trace store or a new file"
        )
    if version > LATEST:
        raise StoreFormatError(
            f"{path} was written by a newer agentbench (schema {version}; this version "
            f"knows up to {LATEST}): upgrade agentbench to read it"
        )
    return version


def migrate(conn: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Apply every missing migration; return how many were applied."""
    version = check(conn, path)
    if version == LATEST:
        return 0
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MARKER_TABLE} ("
        "id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL, "
        "agentbench VARCHAR NOT NULL)"
    )
    pending = [m for m in MIGRATIONS if m.id > version]
    for migration in pending:
        conn.execute("BEGIN")
        try:
            conn.execute(migration.sql)
            conn.execute(
                f"INSERT INTO {MARKER_TABLE} VALUES (?, ?, now(), ?)",
                [migration.id, migration.name, __version__],
            )
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise
    conn.execute("CHECKPOINT")
    return len(pending)
