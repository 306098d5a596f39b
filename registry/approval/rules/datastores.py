"""Destroying data in data stores: SQL, Redis/Memcached/etcd, MongoDB, ORM resets.

Same contract as :mod:`registry.approval.rules`. SQL is read wherever it can
be seen: typed on its own (``DROP TABLE users``), in a client's arguments,
here-documents and pipes (``echo 'DROP TABLE t' | psql``), in a file written
earlier in the same command (``psql -f x.sql``), or in inline interpreter
code (``cur.execute('DROP TABLE t')``).

Decision on ``DROP TABLE IF EXISTS``: it needs approval like any DROP. The
statement cannot tell a scratch table from a production one (``IF EXISTS`` says
only that the author was unsure it exists), and a drop cannot be undone.
``DROP TEMPORARY TABLE`` (session-scoped by definition) and anything run
against an in-memory SQLite database need none.
"""

from __future__ import annotations

import re

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import has_long, long_flags, operands, option_value, word_set
from registry.approval.shell.dataflow import inline_code, stdin_text
from registry.approval.shell.resolve import Cmd

__all__ = ["DATASTORE_PATTERNS"]

_SQL_CLIENTS = word_set(
    """
    psql mysql mariadb sqlite3 sqlite sqlcmd clickhouse-client clickhouse duckdb pgcli mycli
    litecli usql isql snowsql bq cqlsh cockroach mongo mongosh trino presto beeline impala-shell
    sqlplus db2 osql mysqlsh vsql hive spark-sql turso
    """
)
_SQL_VERBS = frozenset({"drop", "delete", "truncate"})
_SQL_DROP_RE = re.compile(
    r"\bdrop\s+(?:table|database|schema|view|index|user|role|function|procedure|trigger|sequence"
    r"|materialized\s+view|keyspace|tablespace|collection|owned|extension|type|domain)\b"
    r"|\.drop(?:Database|Collection)?\s*\(",
    re.IGNORECASE,
)
_SQL_TRUNCATE_RE = re.compile(r"\btruncate\s+(?:table\s+)?(?:only\s+)?[\w.\"`\[]", re.IGNORECASE)
_SQL_DELETE_RE = re.compile(r"\bdelete\s+from\s+\S+", re.IGNORECASE)
_SQL_WHERE_RE = re.compile(r"\bwhere\b", re.IGNORECASE)
_MONGO_DELETE_RE = re.compile(r"\.(?:deleteMany|remove)\s*\(\s*(?:\{\s*\})?\s*\)")
_REDIS_CLIS = frozenset({"redis-cli", "valkey-cli", "keydb-cli"})
_REDIS_ARG_OPTS = frozenset("hpasnurix")
_REDIS_DESTRUCTIVE = frozenset({"flushall", "flushdb", "shutdown", "swapdb", "debug"})
_FLUSH_TEXT_RE = re.compile(
    r"\b(?:flushall|flushdb|flush_all)\b|\bconfig\s+set\s+(?:dir|dbfilename)\b", re.IGNORECASE
)
_CODE_FLUSH_RE = re.compile(r"\.(?:flushall|flushdb|flush_all|flushAll|flushDb)\s*\(")
_NETCAT = frozenset({"nc", "ncat", "netcat", "telnet", "socat"})
_ORM_RESETS: dict[str, tuple[tuple[str, ...], ...]] = {
    "prisma": (("migrate", "reset"), ("db", "push", "--force-reset"),
               ("db", "push", "--accept-data-loss")),
    "rails": (("db:drop",), ("db:reset",), ("db:purge",), ("db:schema:load",),
              ("db:migrate:reset",)),
    "rake": (("db:drop",), ("db:reset",), ("db:purge",), ("db:schema:load",)),
    "sequelize": (("db:drop",), ("db:migrate:undo:all",)),
    "sequelize-cli": (("db:drop",), ("db:migrate:undo:all",)),
    "typeorm": (("schema:drop",),),
    "drizzle-kit": (("drop",),),
    "knex": (("migrate:rollback", "--all"),),
    "supabase": (("db", "reset"),),
    "mix": (("ecto.drop",), ("ecto.reset",)),
    "diesel": (("database", "reset"), ("database", "drop")),
    "flyway": (("clean",),),
    "liquibase": (("drop-all",), ("dropall",)),
    "alembic": (("downgrade", "base"),),
    "django-admin": (("flush",), ("reset_db",), ("sqlflush",)),
    "artisan": (("migrate:fresh",), ("migrate:reset",), ("db:wipe",)),
    "dotnet": (("ef", "database", "drop"),),
}  # fmt: skip
_ELASTIC_URL_RE = re.compile(r"(?::9200|:9201|/_all\b|/_data_stream/|\*)", re.IGNORECASE)


def _in_memory_sqlite(cmd: Cmd) -> bool:
    if cmd.name not in ("sqlite3", "sqlite", "duckdb"):
        return False
    ops = operands(cmd.args, frozenset("ceis"))
    return not ops or ops[0] == ":memory:"


def _file_sql(cmd: Cmd) -> list[str]:
    """SQL in files the client reads that were written earlier in the same command."""
    paths = [r.target.text for r in cmd.redirects if r.op == "<"]
    script = option_value(cmd.args, "-f", "--file", "-i", "--init")
    if script:
        paths.append(script)
    texts = []
    for p in paths:
        written = cmd.ctx.written_file(p, cmd.cwd)
        if written is not None and written.content:
            texts.append(written.content)
    return texts


def _sql_texts(cmd: Cmd) -> list[str]:
    texts: list[str] = []
    if cmd.name in _SQL_VERBS:
        texts.append(" ".join(cmd.argv))
    elif cmd.name in _SQL_CLIENTS and not _in_memory_sqlite(cmd):
        texts.append(" ".join(cmd.args))
        fed = stdin_text(cmd)
        if fed:
            texts.append(fed)
        texts.extend(_file_sql(cmd))
    code = inline_code(cmd)
    if code:
        texts.append(code)
    return texts


def _sql_drop(cmd: Cmd) -> bool:
    if cmd.name in ("dropdb", "dropuser", "pg_dropcluster") or (
        cmd.name == "mysqladmin" and any(a.lower() == "drop" for a in cmd.args)
    ):
        return True
    return any(_SQL_DROP_RE.search(t) for t in _sql_texts(cmd))


def _sql_truncate(cmd: Cmd) -> bool:
    return any(_SQL_TRUNCATE_RE.search(t) for t in _sql_texts(cmd))


def _sql_delete_without_where(cmd: Cmd) -> bool:
    for text in _sql_texts(cmd):
        if _MONGO_DELETE_RE.search(text):
            return True
        for stmt in text.split(";"):
            if _SQL_DELETE_RE.search(stmt) and not _SQL_WHERE_RE.search(stmt):
                return True
    return False


def _redis_words(cmd: Cmd) -> list[str]:
    ops: list[str] = []
    args = cmd.args
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1:
            i += 2 if (len(a) == 2 and a[1] in _REDIS_ARG_OPTS) else 1
            continue
        ops.append(a.lower())
        i += 1
    return ops


def _datastore_flush(cmd: Cmd) -> bool:
    name = cmd.name
    if name in _REDIS_CLIS:
        words = _redis_words(cmd)
        if words[:1] and words[0] in _REDIS_DESTRUCTIVE:
            return True
        if words[:3] == ["config", "set", "dir"] or words[:3] == ["config", "set", "dbfilename"]:
            return True
        fed = stdin_text(cmd)
        return fed is not None and bool(_FLUSH_TEXT_RE.search(fed))
    if name in _NETCAT:
        fed = stdin_text(cmd)
        return fed is not None and bool(_FLUSH_TEXT_RE.search(fed))
    if name == "etcdctl":
        return "del" in cmd.args and bool({"prefix", "from-key"} & long_flags(cmd.args))
    if name == "influx":
        return cmd.args[:1] == ["delete"] or cmd.args[:2] in (["bucket", "delete"],
                                                              ["org", "delete"])  # fmt: skip
    if name in ("curl", "http", "xh", "https"):
        method = option_value(cmd.args, "-X", "--request") or ""
        if method.upper() == "DELETE" or (name != "curl" and "DELETE" in cmd.args):
            return any(_ELASTIC_URL_RE.search(a) for a in operands(cmd.args, frozenset("XHdo")))
        return False
    code = inline_code(cmd)
    return code is not None and bool(_CODE_FLUSH_RE.search(code))


def _orm_reset(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if (name.startswith("python") and args[:1] == ["manage.py"]) or name == "manage.py":
        rest = args[1:] if name.startswith("python") else args
        return bool(rest) and rest[0] in ("flush", "reset_db", "sqlflush")
    if name == "php" and args[:1] == ["artisan"]:
        name, args = "artisan", args[1:]
    if name in ("bin/rails", "bin/rake"):
        name = name[4:]
    forms = _ORM_RESETS.get(name)
    if not forms:
        return False
    lowered = [a.lower() for a in args]
    for form in forms:
        verbs = [w for w in form if not w.startswith("--")]
        flags = [w for w in form if w.startswith("--")]
        positional = [a for a in lowered if not a.startswith("-")]
        if positional[: len(verbs)] == list(verbs) and all(
            has_long(args, f[2:], min_len=len(f) - 2) for f in flags
        ):
            return True
    return False


DATASTORE_PATTERNS: list[Pattern] = [
    Pattern("sql_drop", _sql_drop, "SQL DROP (tables, databases, schemas)"),
    Pattern("sql_truncate", _sql_truncate, "SQL TRUNCATE"),
    Pattern("sql_delete_without_where", _sql_delete_without_where, "SQL DELETE without WHERE"),
    Pattern(
        "datastore_flush",
        _datastore_flush,
        "flush, drop or shut down a data store (Redis FLUSHALL, Memcached flush_all, etcd del)",
    ),
    Pattern(
        "database_reset",
        _orm_reset,
        "reset or drop a database through a framework (prisma migrate reset, rails db:drop)",
    ),
]
