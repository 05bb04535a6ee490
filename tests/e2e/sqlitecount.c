/* The guest side of tests/e2e/drives.sh's SQLite check: one database on a
 * shared drive written from two sandboxes at once, static (Debian's
 * libsqlite3.a) so it runs in the busybox base image and on the host.
 *   sqlitecount init DB MODE          creates table rows(id, who, n) and
 *                                     the one-row table counter(v), in
 *                                     MODE: "delete" (rollback journal) or
 *                                     "wal"
 *   sqlitecount insert DB MODE WHO N  N transactions, each inserting a row
 *                                     and adding one to counter.v (a
 *                                     read-modify-write that ends wrong if
 *                                     two writers ever overlap)
 *   sqlitecount check DB              prints "integrity=<PRAGMA
 *                                     integrity_check> rows=R counter=V"
 * Across sandboxes SQLite excludes writers with POSIX record locks, which
 * the VMM serves on the host file (docs/virtio-fs.md, Locks). WAL mode
 * also needs its -shm index mapped shared by every connection, which no
 * two guests' page caches can give (https://sqlite.org/wal.html: "WAL does
 * not work over a network filesystem"); so in "wal" mode each connection
 * sets locking_mode=EXCLUSIVE first, which keeps the index in the
 * process's heap, and opens the database anew every WAL_TURN transactions
 * so that the other sandbox gets turns. Exits 0, or 1 with SQLite's message. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAL_TURN 3 /* transactions per connection in "wal" mode */
#define BUSY_RETRIES 2000 /* a few minutes of another writer's turns */

/* How long to wait before retry number k (1, 2, ...): a random time up to
 * 10 ms doubled per retry in a row, capped at 160 ms. Random, because two
 * writers that collide and then wait equal times collide again: both open,
 * both take the shared lock, neither can have the exclusive one, and
 * (seen in the TCG harness) they repeat that in step until they give up. */
static void backoff(unsigned k, unsigned *seed)
{
	unsigned ceil_ms = 10u << (k < 4 ? k : 4);
	long ms = 1 + (long)(rand_r(seed) % ceil_ms);

	nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000 * 1000 }, NULL);
}

static int fail(sqlite3 *db, const char *what)
{
	fprintf(stderr, "sqlitecount: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
	sqlite3_close(db);
	return 1;
}

/* Opens DB for writing in MODE, waiting up to a minute for a lock. */
static sqlite3 *open_db(const char *path, const char *mode)
{
	sqlite3 *db = NULL;
	int wal = strcmp(mode, "wal") == 0;

	if (sqlite3_open(path, &db) != SQLITE_OK) {
		fail(db, "open");
		return NULL;
	}
	sqlite3_busy_timeout(db, 60000);
	if (wal) {
		int keep = 1; /* the -wal file stays between connections: no
			       * new file and header for each one */

		sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &keep);
		if (sqlite3_exec(db, "PRAGMA locking_mode=EXCLUSIVE", NULL, NULL, NULL) != SQLITE_OK) {
			fail(db, "locking_mode");
			return NULL;
		}
	}
	return db;
}

static int init(const char *path, const char *mode)
{
	char sql[160];
	sqlite3 *db = open_db(path, mode);

	if (!db)
		return 1;
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s", strcmp(mode, "wal") == 0 ? "WAL" : "DELETE");
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "CREATE TABLE rows(id INTEGER PRIMARY KEY, who TEXT, n INTEGER);"
			     "CREATE TABLE counter(v INTEGER); INSERT INTO counter VALUES (0);",
			 NULL, NULL, NULL) != SQLITE_OK)
		return fail(db, "init");
	return sqlite3_close(db) == SQLITE_OK ? 0 : 1;
}

/* One transaction: a row, and counter.v read and written back plus one. */
static int one(sqlite3 *db, const char *who, int n)
{
	sqlite3_stmt *st = NULL;
	long v = -1;
	char sql[200];

	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT v FROM counter", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	snprintf(sql, sizeof(sql), "INSERT INTO rows(who, n) VALUES ('%s', %d); UPDATE counter SET v = %ld",
		 who, n, v + 1);
	if (v < 0 || sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	return 0;
}

static int insert(const char *path, const char *mode, const char *who, int n)
{
	int wal = strcmp(mode, "wal") == 0;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() << 8 ^ (unsigned)who[0];
	sqlite3 *db = NULL;

	if (strspn(who, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(who))
		return fprintf(stderr, "sqlitecount: WHO: letters, digits and '-' only\n"), 1;
	for (int i = 0, busy = 0, inarow = 0; i < n; i++) {
		if (!db && !(db = open_db(path, mode)))
			return 1;
		if (one(db, who, i) < 0) {
			/* SQLite returns SQLITE_BUSY at once, without its busy
			 * handler, where waiting could deadlock (a connection
			 * taking a WAL database's exclusive lock while another
			 * holds it): the application retries, from a new
			 * connection. */
			if (sqlite3_errcode(db) != SQLITE_BUSY || ++busy > BUSY_RETRIES)
				return fail(db, "transaction");
			sqlite3_close(db);
			db = NULL;
			backoff((unsigned)++inarow, &seed);
			i--;
			continue;
		}
		inarow = 0;
		if (wal && i % WAL_TURN == WAL_TURN - 1) {
			/* Give the other writer its turn: it polls the lock
			 * (SQLite's busy handler, or the retry above), so a
			 * writer that reopened at once would keep it. */
			if (sqlite3_close(db) != SQLITE_OK)
				return fail(db, "close");
			db = NULL;
			nanosleep(&(struct timespec){ .tv_nsec = 150 * 1000 * 1000 }, NULL);
		}
	}
	return db && sqlite3_close(db) != SQLITE_OK ? fail(db, "close") : 0;
}

static int check(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char integrity[256] = "?";
	long rows = -1, v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		return fail(db, "open");
	sqlite3_busy_timeout(db, 60000);
	/* A WAL database needs the same heap index its writers used. */
	sqlite3_exec(db, "PRAGMA locking_mode=EXCLUSIVE", NULL, NULL, NULL);
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		snprintf(integrity, sizeof(integrity), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM rows), (SELECT v FROM counter)", -1, &st,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		rows = sqlite3_column_int64(st, 0);
		v = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	printf("integrity=%s rows=%ld counter=%ld\n", integrity, rows, v);
	sqlite3_close(db);
	return rows < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "init") == 0)
		return init(argv[2], argv[3]);
	if (argc == 6 && strcmp(argv[1], "insert") == 0)
		return insert(argv[2], argv[3], argv[4], atoi(argv[5]));
	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return check(argv[2]);
	fprintf(stderr, "usage: sqlitecount init DB MODE | insert DB MODE WHO N | check DB\n");
	return 1;
}
