"""A counter store on one SQLite file in WAL mode: readers never block
the writer, and each process opens its own connection."""
import sqlite3


class Store:
    def __init__(self, path, timeout=30.0):
        self.path = path
        self.db = sqlite3.connect(path, timeout=timeout, isolation_level=None)
        self.mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL)")

    def bump(self, name, by=1):
        # BEGIN IMMEDIATE takes the write lock first: no upgrade deadlock
        # between two processes that both read before they write.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(
                "INSERT INTO counters(name, n) VALUES(?, ?) "
                "ON CONFLICT(name) DO UPDATE SET n = n + excluded.n", (name, by))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def get(self, name):
        row = self.db.execute("SELECT n FROM counters WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    def names(self):
        return [r[0] for r in self.db.execute("SELECT name FROM counters ORDER BY name")]

    def close(self):
        self.db.close()
