"""tally: counters kept in SQLite (WAL mode), bumped by worker processes.

The small project the e2e part "builtin" (tests/e2e/builtin.sh) runs the
test suite of, in the built-in python image and on the host: a
developer's loop with multiprocessing and sqlite3 in WAL mode.
"""
from tally.store import Store
from tally.workers import bump_in_parallel, squares

__all__ = ["Store", "bump_in_parallel", "squares"]
