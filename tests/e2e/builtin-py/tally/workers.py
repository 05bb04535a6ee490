"""Work spread over processes (multiprocessing), each with its own
connection to the store."""
import multiprocessing

from tally.store import Store


def _bump_many(args):
    path, name, times = args
    s = Store(path)
    for _ in range(times):
        s.bump(name)
    s.close()
    return times


def bump_in_parallel(path, name, procs, times):
    """procs processes bump name times each; returns what they report."""
    with multiprocessing.Pool(procs) as pool:
        return sum(pool.map(_bump_many, [(path, name, times)] * procs))


def _square(x):
    return x * x


def squares(xs, procs=2):
    with multiprocessing.Pool(procs) as pool:
        return pool.map(_square, xs)
