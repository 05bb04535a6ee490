"""Processes (multiprocessing) sharing the store: no bump is lost."""
import multiprocessing
import os
import tempfile
import unittest

from tally import Store, bump_in_parallel, squares


def _child(q, path):
    s = Store(path)
    s.bump("child", 7)
    q.put((os.getpid(), s.mode))
    s.close()


class WorkersTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "w.db")
        Store(self.path).close()

    def tearDown(self):
        self.dir.cleanup()

    def test_parallel_bumps_all_counted(self):
        self.assertEqual(bump_in_parallel(self.path, "hits", 4, 25), 100)
        self.assertEqual(Store(self.path).get("hits"), 100)

    def test_pool_map(self):
        self.assertEqual(squares(range(10)), [x * x for x in range(10)])

    def test_process_and_queue(self):
        q = multiprocessing.Queue()
        p = multiprocessing.Process(target=_child, args=(q, self.path))
        p.start()
        pid, mode = q.get(timeout=60)
        p.join(60)
        self.assertEqual(p.exitcode, 0)
        self.assertNotEqual(pid, os.getpid())
        self.assertEqual(mode, "wal")
        self.assertEqual(Store(self.path).get("child"), 7)

    def test_spawn_context(self):
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(2) as pool:
            self.assertEqual(pool.map(abs, [-1, -2, 3]), [1, 2, 3])
