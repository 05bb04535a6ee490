"""The store on its own: WAL mode, bumps, a reader beside an open write
transaction (what WAL is for)."""
import os
import sqlite3
import tempfile
import unittest

from tally import Store


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "t.db")
        self.s = Store(self.path)

    def tearDown(self):
        self.s.close()
        self.dir.cleanup()

    def test_wal_mode(self):
        self.assertEqual(self.s.mode, "wal")
        self.assertTrue(os.path.exists(self.path + "-wal"))

    def test_bump_and_get(self):
        self.s.bump("a")
        self.s.bump("a", 4)
        self.s.bump("b")
        self.assertEqual(self.s.get("a"), 5)
        self.assertEqual(self.s.get("missing"), 0)
        self.assertEqual(self.s.names(), ["a", "b"])

    def test_reader_beside_writer(self):
        self.s.bump("x", 1)
        w = sqlite3.connect(self.path, isolation_level=None)
        w.execute("BEGIN IMMEDIATE")
        w.execute("UPDATE counters SET n = 99 WHERE name = 'x'")
        # the write is not committed: a reader sees the old value at once
        self.assertEqual(Store(self.path, timeout=0.1).get("x"), 1)
        w.execute("COMMIT")
        self.assertEqual(self.s.get("x"), 99)
        w.close()

    def test_rollback_on_error(self):
        self.s.bump("r", 2)
        with self.assertRaises(sqlite3.IntegrityError):
            self.s.db.execute("BEGIN IMMEDIATE")
            self.s.db.execute("INSERT INTO counters(name, n) VALUES('r', 1)")
        self.s.db.execute("ROLLBACK")
        self.assertEqual(self.s.get("r"), 2)
