/* Reading a whole ext4 out with debugfs rdump, confined (docs/images.md).
 *
 * The ext4s vmm reads out this way were written by a guest (a Dockerfile
 * RUN step's disk, an image's root filesystem), so their directories are
 * hostile input: debugfs follows a symbolic link already in the
 * destination when it creates a file, and a crafted directory holds two
 * entries of one name (a link to any host path, then a regular file), or
 * a name with a '/' in it, to make rdump write outside its destination as
 * the user who builds. rdump_confined runs debugfs under Landlock (Linux
 * 5.13+) with every filesystem write outside the destination refused, and
 * refuses to run without Landlock. */
#ifndef CLI_RDUMP_H
#define CLI_RDUMP_H

/* 0 if this kernel can confine rdump, else -EOPNOTSUPP (why[] says). */
int rdump_can_confine(char *why, size_t len);
/* Restricts the calling process (and what it execs) to filesystem writes
 * beneath dir; reads stay allowed. 0 or -errno. */
int confine_writes_below(const char *dir);
/* debugfs -R "rdump / DEST" IMAGE, writes confined beneath dest (an
 * existing directory). quiet: its stdout/stderr to /dev/null. 0, the
 * exit status of debugfs (>0), or -errno. */
int rdump_confined(const char *image, const char *dest, int quiet);

#endif
