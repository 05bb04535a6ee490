/* The sandbox API wire format (docs/api.md), shared by guest-init and the
 * host client: one request per connection, as frames.
 *
 *   frame = u32 length (little-endian, payload bytes) | u8 type | 3 zero
 *           bytes | payload
 *
 * The client opens with a REQUEST frame (JSON); then both sides stream
 * frames as the operation defines. */
#ifndef GUEST_PROTO_H
#define GUEST_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define API_VSOCK_PORT 1024
/* The ready notice (docs/vsock.md): guest-init connects to the host (CID 2)
 * on this port once its API listens, writes READY_NOTICE and keeps the
 * connection; a restore's transport reset breaks it, and guest-init
 * connects again, which tells the host the clone is back. */
#define API_NOTICE_PORT 1025
#define READY_NOTICE "ready\n"
/* After READY_NOTICE, guest-init says on the same connection, one byte per
 * change, whether a snapshot taken now would catch it settled: a spare API
 * worker waiting in accept (NOTICE_SETTLED), or one taken by a connection
 * with the next not forked yet (NOTICE_PENDING). The VMM waits, bounded,
 * for SETTLED before it pauses for a snapshot, so a clone's first request
 * finds a worker waiting (docs/vsock.md, "Ready notice"). */
#define NOTICE_SETTLED 'S'
#define NOTICE_PENDING 'P'
#define API_VERSION 1     /* what a client sends for version 1 operations */
#define API_VERSION_MAX 2 /* the newest version guest-init serves (it serves 1 too) */
#define FRAME_HDR 8
#define FRAME_MAX (1u << 20)      /* largest payload accepted */
#define REQUEST_MAX (64u * 1024)  /* largest REQUEST payload accepted */
#define DATA_CHUNK (64u * 1024)   /* what senders put in one data frame */

enum frame_type {
	/* client -> guest */
	F_REQUEST = 1,   /* JSON request */
	F_STDIN = 2,     /* exec: bytes for the command's stdin */
	F_STDIN_EOF = 3, /* exec: close the command's stdin */
	F_SIGNAL = 4,    /* exec: u32 signal number to the command */
	F_RESIZE = 5,    /* exec with pty: u16 rows, u16 cols */
	/* both ways */
	F_DATA = 6,      /* file content */
	F_END = 7,       /* end of file content */
	/* guest -> client */
	F_STDOUT = 16,
	F_STDERR = 17,
	F_EXIT = 18,     /* JSON {"exit_code":N} or {"signal":N}, "timed_out" */
	F_RESULT = 19,   /* JSON: the operation's result */
	F_ERROR = 20,    /* JSON {"error":"ENOENT","errno":2,"message":"..."} */
	F_STARTED = 21,  /* JSON {"pid":N}: exec started */
	F_EVENT = 22,    /* v2 watch: JSON {"events":[...]} */
};

/* Writes one frame; 0 or -1 (errno set). Blocking, retries short writes. */
int frame_write(int fd, uint8_t type, const void *data, size_t len);
/* Reads one frame into buf (at most max payload bytes). Returns 0, -1 on
 * EOF or error (errno; EOF gives errno 0), or -2 if the frame is larger
 * than max (the connection is then unusable). */
int frame_read(int fd, uint8_t *type, void *buf, size_t max, size_t *len);
/* Reads exactly n bytes: 0, or -1 (EOF: errno 0). */
int read_full(int fd, void *buf, size_t n);
/* Reads until n bytes or the end of the file: the count, or -errno. */
ssize_t read_upto(int fd, void *buf, size_t n);
/* Writes all n bytes: 0, or -1 (errno; ENOSPC: a write took nothing). */
int write_full(int fd, const void *buf, size_t n);
/* The same at file offset off (pread/pwrite; the file offset stays):
 * 0 or -errno (a read that meets the end of the file: -EIO). */
int pread_full(int fd, void *buf, size_t n, uint64_t off);
int pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
/* Carries bytes both ways between two connected streams until both ends
 * are done; each side's end of stream is passed on as a half-close
 * (shutdown SHUT_WR). buf is the scratch space (len bytes). */
void splice_streams(int a, int b, char *buf, size_t len);

/* CLOCK_MONOTONIC in milliseconds (timeouts, uptime). */
uint64_t now_ms(void);

/* Error names for F_ERROR ("ENOENT" ...); "EIO" style for unknown ones. */
const char *errno_name(int e);
int errno_from_name(const char *name);

#endif
