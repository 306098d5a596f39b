"""Data stores: SQL on its own and through clients, Redis/Memcached/etcd, Mongo, framework resets.

Decision recorded here and in ``registry/approval/rules/datastores.py``:
``DROP TABLE IF EXISTS`` needs approval like any DROP (the statement cannot tell
a scratch table from a production one); ``DROP TEMPORARY TABLE`` and anything
against an in-memory SQLite database need none.
"""

from __future__ import annotations

from .detection import allowed_test, dangerous_test, detected_test

DANGEROUS: list[tuple[str, str]] = [
    # SQL on its own
    ("DROP TABLE users", "sql_drop"),
    ("drop database prod;", "sql_drop"),
    ("DROP TABLE IF EXISTS scratch_results", "sql_drop"),
    ("DELETE FROM users", "sql_delete_without_where"),
    ("delete from sessions;", "sql_delete_without_where"),
    ("TRUNCATE TABLE logs", "sql_truncate"),
    ("truncate orders", "sql_truncate"),
    # through clients
    ('psql -c "DROP TABLE users"', "sql_drop"),
    ('psql -d app -c "drop database prod;"', "sql_drop"),
    ("mysql -e 'DROP SCHEMA analytics'", "sql_drop"),
    ('sqlite3 app.db "DROP TABLE t"', "sql_drop"),
    ("echo 'DROP TABLE users;' | psql", "sql_drop"),
    ("psql <<EOF\nDROP TABLE users;\nEOF", "sql_drop"),
    ("mysql db <<< 'drop table x'", "sql_drop"),
    ("dropdb production", "sql_drop"),
    ("mysqladmin -u root drop shop", "sql_drop"),
    ('docker exec -it db psql -U app -c "DROP TABLE orders"', "sql_drop"),
    ("python3 -c \"cur.execute('DROP TABLE users')\"", "sql_drop"),
    ("cqlsh -e 'DROP KEYSPACE metrics'", "sql_drop"),
    ("clickhouse-client --query 'DROP DATABASE events'", "sql_drop"),
    ("duckdb warehouse.db 'DROP VIEW daily'", "sql_drop"),
    ("psql -c 'DROP TABLE IF EXISTS tmp_import'", "sql_drop"),
    ('psql -c "TRUNCATE users"', "sql_truncate"),
    ('mysql -e "truncate table logs"', "sql_truncate"),
    ('psql -c "DELETE FROM users"', "sql_delete_without_where"),
    ('mysql -e "delete from sessions;"', "sql_delete_without_where"),
    ('sqlite3 db.sqlite "DELETE FROM t; SELECT 1 WHERE 1"', "sql_delete_without_where"),
    ('printf "DELETE FROM audit" | mysql prod', "sql_delete_without_where"),
    ("cat > w.sql <<EOF\nDELETE FROM orders;\nEOF\npsql -f w.sql", "sql_delete_without_where"),
    ("mongosh app --eval 'db.dropDatabase()'", "sql_drop"),
    ("mongo --eval 'db.users.drop()'", "sql_drop"),
    ("mongosh --eval 'db.logs.deleteMany({})'", "sql_delete_without_where"),
    ("mongo app --eval 'db.sessions.remove({})'", "sql_delete_without_where"),
    # key-value stores
    ("redis-cli FLUSHALL", "datastore_flush"),
    ("redis-cli flushdb", "datastore_flush"),
    ("redis-cli -h cache -p 6380 -n 2 FLUSHDB", "datastore_flush"),
    ("redis-cli -a secret shutdown", "datastore_flush"),
    ("redis-cli config set dir /var/spool/cron", "datastore_flush"),
    ("echo FLUSHALL | redis-cli", "datastore_flush"),
    ("valkey-cli flushall async", "datastore_flush"),
    ("echo flush_all | nc localhost 11211", "datastore_flush"),
    ("printf 'flush_all\\r\\n' | ncat cache 11211", "datastore_flush"),
    ("etcdctl del --prefix ''", "datastore_flush"),
    ("etcdctl del '' --from-key", "datastore_flush"),
    ("python3 -c 'import redis; redis.Redis().flushall()'", "datastore_flush"),
    ("curl -X DELETE http://localhost:9200/logs-*", "datastore_flush"),
    ("curl -XDELETE localhost:9200/_all", "datastore_flush"),
    ("influx bucket delete -n metrics", "datastore_flush"),
    # framework resets
    ("npx prisma migrate reset --force", "database_reset"),
    ("prisma db push --force-reset", "database_reset"),
    ("prisma db push --accept-data-loss", "database_reset"),
    ("rails db:drop", "database_reset"),
    ("bin/rails db:reset", "database_reset"),
    ("bundle exec rake db:schema:load", "database_reset"),
    ("python manage.py flush --noinput", "database_reset"),
    ("./manage.py reset_db", "database_reset"),
    ("npx sequelize-cli db:drop", "database_reset"),
    ("php artisan migrate:fresh --seed", "database_reset"),
    ("supabase db reset", "database_reset"),
    ("mix ecto.reset", "database_reset"),
    ("dotnet ef database drop --force", "database_reset"),
    ("alembic downgrade base", "database_reset"),
    ("flyway clean", "database_reset"),
    ("knex migrate:rollback --all", "database_reset"),
    ("typeorm schema:drop", "database_reset"),
]

OBFUSCATED: list[tuple[str, str]] = [
    ("q='DROP TABLE users'; psql -c \"$q\"", "sql_drop"),
    ('psql -c "$(echo DROP TABLE users)"', "sql_drop"),
    ("echo RFJPUCBUQUJMRSB1c2Vycw== | base64 -d | psql", "sql_drop"),
    ("psql -c \"DR\"OP' TABLE users'", "sql_drop"),
    ("psql <<< \"$(printf 'DROP TABLE %s' users)\"", "sql_drop"),
    ("redis-cli FLUSH''ALL", "datastore_flush"),
    ("c=FLUSHALL; redis-cli $c", "datastore_flush"),
    ('psql -c "DROP TABLE x', "sql_drop"),
    ("mysql -e 'DELETE\\\n FROM users'", "sql_delete_without_where"),
]

ALLOWED: list[str] = [
    "psql -c 'SELECT * FROM users'",
    "mysql -e 'DELETE FROM sessions WHERE expired = 1'",
    "sqlite3 db 'UPDATE t SET x=1 WHERE id=2'",
    "psql -c 'CREATE TABLE t (id int)'",
    "DELETE FROM users WHERE id = 1",
    "mysql -e 'DROP TEMPORARY TABLE tmp_rows'",
    "sqlite3 :memory: 'DROP TABLE t'",
    "redis-cli get key",
    "redis-cli keys 'user:*'",
    "redis-cli ping",
    "redis-cli del session:42",
    "etcdctl get --prefix /config",
    "etcdctl del /config/feature-x",
    "mongosh app --eval 'db.users.find()'",
    "npx prisma migrate dev",
    "npx prisma generate",
    "prisma db push",
    "rails db:migrate",
    "python manage.py migrate",
    "python manage.py makemigrations",
    "alembic upgrade head",
    "curl -X DELETE http://localhost:8000/api/items/1",
    "grep -r 'DROP TABLE' migrations/",
    "echo 'DELETE FROM users'",
]


test_dangerous = dangerous_test(DANGEROUS)
test_obfuscated = detected_test(OBFUSCATED)
test_allowed = allowed_test(ALLOWED)
