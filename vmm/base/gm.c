/* Guest memory: regions, the one (gpa, len) accessor (vmm/base/gm.h). */
#include "vmm/base/gm.h"
#include "vmm/base/log.h"
#include "vmm/base/zpages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#define GM_MAX_GPA (1ull << 52)

int gm_x86_layout(uint64_t ram, struct gm_region out[GM_MAX_REGIONS])
{
	if (ram == 0 || ram % GM_PAGE_SIZE)
		return -EINVAL;
	memset(out, 0, sizeof(out[0]) * GM_MAX_REGIONS);
	if (ram <= GM_MMIO_GAP_START) {
		out[0].size = ram;
		return 1;
	}
	if (ram - GM_MMIO_GAP_START > GM_MAX_GPA - GM_MMIO_GAP_END)
		return -EINVAL;
	out[0].size = GM_MMIO_GAP_START;
	out[1].gpa = GM_MMIO_GAP_END;
	out[1].size = ram - GM_MMIO_GAP_START;
	return 2;
}

static int gm_check_regions(const struct gm_region *regions, unsigned nr, uint64_t *total)
{
	uint64_t sum = 0, prev_end = 0;
	unsigned i;

	if (nr == 0 || nr > GM_MAX_REGIONS)
		return -EINVAL;
	for (i = 0; i < nr; i++) {
		const struct gm_region *r = &regions[i];

		if (r->size == 0 || r->gpa % GM_PAGE_SIZE || r->size % GM_PAGE_SIZE)
			return -EINVAL;
		if (r->gpa > GM_MAX_GPA || r->size > GM_MAX_GPA - r->gpa)
			return -EINVAL;
		if (i > 0 && r->gpa < prev_end)
			return -EINVAL;
		prev_end = r->gpa + r->size;
		sum += r->size; /* cannot wrap: every region ends below 2^52 */
	}
	*total = sum;
	return 0;
}

/* Every constructor's start: an empty gm (no descriptor), the layout
 * checked and its size in *total. */
static int gm_begin(struct gm *gm, const struct gm_region *regions, unsigned nr, uint64_t *total)
{
	memset(gm, 0, sizeof(*gm));
	gm->fd = -1;
	return gm_check_regions(regions, nr, total);
}

static void gm_assign(struct gm *gm, const struct gm_region *regions, unsigned nr)
{
	uint64_t off = 0;
	unsigned i;

	gm->nr = nr;
	for (i = 0; i < nr; i++) {
		gm->r[i].gpa = regions[i].gpa;
		gm->r[i].size = regions[i].size;
		gm->r[i].file_off = off;
		gm->r[i].host = gm->map + off;
		off += regions[i].size;
	}
}

int gm_create(struct gm *gm, const struct gm_region *regions, unsigned nr)
{
	uint64_t total;
	int e;

	if ((e = gm_begin(gm, regions, nr, &total)))
		return e;
	gm->fd = memfd_create("vmm-guest-ram", MFD_CLOEXEC);
	if (gm->fd < 0)
		return -errno;
	if (ftruncate(gm->fd, (off_t)total) < 0) {
		e = -errno;
		goto err_close;
	}
	gm->map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
		       gm->fd, 0);
	if (gm->map == MAP_FAILED) {
		e = -errno;
		goto err_close;
	}
	gm->total = total;
	gm_assign(gm, regions, nr);
	return 0;

err_close:
	close(gm->fd);
	gm->fd = -1;
	gm->map = NULL;
	return e;
}

int gm_create_x86(struct gm *gm, uint64_t ram)
{
	struct gm_region r[GM_MAX_REGIONS];
	int n = gm_x86_layout(ram, r);

	if (n < 0)
		return n;
	return gm_create(gm, r, (unsigned)n);
}

int gm_open_file(struct gm *gm, const char *path, const struct gm_region *regions,
		 unsigned nr)
{
	struct stat st;
	uint64_t total;
	int e;

	if ((e = gm_begin(gm, regions, nr, &total)))
		return e;
	/* A snapshot's memory file is always a regular file vmm wrote: a
	 * symbolic link in its place (a tampered snapshot) would hand the
	 * guest whatever file it names. */
	gm->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (gm->fd < 0)
		return -errno;
	if (fstat(gm->fd, &st) < 0) {
		e = -errno;
		goto err_close;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != total) {
		log_err("%s: memory file is %lld bytes, the layout needs %llu", path,
			(long long)st.st_size, (unsigned long long)total);
		e = -EINVAL;
		goto err_close;
	}
	gm->map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE,
		       gm->fd, 0);
	if (gm->map == MAP_FAILED) {
		e = -errno;
		goto err_close;
	}
	gm->private_map = 1;
	gm->total = total;
	gm_assign(gm, regions, nr);
	return 0;

err_close:
	close(gm->fd);
	gm->fd = -1;
	gm->map = NULL;
	return e;
}

int gm_create_anon(struct gm *gm, const struct gm_region *regions, unsigned nr)
{
	uint64_t total;
	int e;

	if ((e = gm_begin(gm, regions, nr, &total)))
		return e;
	/* Nothing populated: every first touch is a missing-page fault, for
	 * whoever registered the range (vmm/base/uffd.h). */
	gm->map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (gm->map == MAP_FAILED) {
		gm->map = NULL;
		return -errno;
	}
	gm->private_map = 1; /* balloon: MADV_DONTNEED (MADV_REMOVE is for shared memory) */
	gm->total = total;
	gm_assign(gm, regions, nr);
	return 0;
}

int gm_track_dirty(struct gm *gm)
{
	if (gm->dirty.w)
		return 0;
	return dirty_init(&gm->dirty, gm->total / GM_PAGE_SIZE);
}

void gm_destroy(struct gm *gm)
{
	dirty_free(&gm->dirty);
	if (gm->map && gm->map != MAP_FAILED)
		munmap(gm->map, gm->total);
	if (gm->fd >= 0)
		close(gm->fd);
	memset(gm, 0, sizeof(*gm));
	gm->fd = -1;
}

void *gm_ptr(const struct gm *gm, uint64_t gpa, uint64_t len)
{
	unsigned i;

	for (i = 0; i < gm->nr; i++) {
		const struct gm_region *r = &gm->r[i];
		uint64_t off;

		if (gpa < r->gpa)
			continue;
		off = gpa - r->gpa;
		/* Subtract first, then compare: no gpa + len that could wrap. */
		if (off > r->size || len > r->size - off)
			continue;
		return r->host + off;
	}
	return NULL;
}

void *gm_ptr_w(const struct gm *gm, uint64_t gpa, uint64_t len)
{
	void *p = gm_ptr(gm, gpa, len);

	if (p)
		gm_mark_host(gm, p, len);
	return p;
}

int gm_load_file(const struct gm *gm, uint64_t gpa, int fd, uint64_t off, uint64_t len)
{
	const uint8_t *p = gm_ptr(gm, gpa, len);
	off_t in = (off_t)off;
	uint64_t done = 0;

	if (!p)
		return -EINVAL;
	if (gm->private_map || gm->fd < 0)
		return -EOPNOTSUPP;
	if (lseek(gm->fd, (off_t)(p - gm->map), SEEK_SET) < 0)
		return -errno;
	while (done < len) {
		/* sendfile moves at most 0x7ffff000 bytes a call */
		ssize_t n = sendfile(gm->fd, fd, &in, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file is shorter than it was */
		done += (uint64_t)n;
	}
	return 0;
}

static int discard(const struct gm *gm, uint8_t *p, uint64_t len)
{
	if (len == 0)
		return 0;
	/* A shared memfd's page reads zeros from now on: marked, so a diff
	 * holds the change. A private mapping's page reads its file's page
	 * again (or, restored through a page-fault handler, the snapshot's):
	 * left unmarked (a page the guest wrote is in KVM's dirty log
	 * anyway). That is what a diff against that file holds already; a
	 * page a restored diff had overlaid reads its base's content, not
	 * the overlay's, which a free page may.
	 * The guest gave the page up, so it never reads what was there: a
	 * guest that needs free pages zeroed (init_on_free) turns free page
	 * reporting off without VIRTIO_BALLOON_F_PAGE_POISON (the virtio
	 * balloon's "Page Poison"; Linux's virtballoon_validate), which vmm
	 * does not offer. */
	if (!gm->private_map)
		gm_mark_host(gm, p, len);
	if (madvise(p, len, gm->private_map ? MADV_DONTNEED : MADV_REMOVE) < 0)
		return -errno;
	return 0;
}

int gm_discard(const struct gm *gm, uint64_t gpa, uint64_t len)
{
	uint8_t *p;

	if (gpa % GM_PAGE_SIZE || len % GM_PAGE_SIZE)
		return -EINVAL;
	p = gm_ptr(gm, gpa, len);
	if (!p)
		return -EFAULT;
	return discard(gm, p, len);
}

int gm_discard_host(const struct gm *gm, void *host, uint64_t len)
{
	uintptr_t p = (uintptr_t)host, start, end;
	unsigned i;

	for (i = 0; i < gm->nr; i++) {
		const struct gm_region *r = &gm->r[i];
		uintptr_t base = (uintptr_t)r->host;

		/* Subtract first, then compare, as gm_ptr. */
		if (p < base || p - base > r->size || len > r->size - (p - base))
			continue;
		/* Regions are page-aligned in the mapping: round inwards. */
		start = (p + GM_PAGE_SIZE - 1) & ~(uintptr_t)(GM_PAGE_SIZE - 1);
		end = (p + len) & ~(uintptr_t)(GM_PAGE_SIZE - 1);
		return end > start ? discard(gm, (uint8_t *)start, end - start) : 0;
	}
	return -EFAULT;
}

int gm_read(const struct gm *gm, uint64_t gpa, void *dst, uint64_t len)
{
	const void *p = gm_ptr(gm, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(dst, p, len);
	return 0;
}

int gm_write(const struct gm *gm, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = gm_ptr_w(gm, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(p, src, len);
	return 0;
}

uint64_t gm_low_end(const struct gm *gm)
{
	return gm->nr ? gm->r[0].gpa + gm->r[0].size : 0;
}

int gm_dump(const struct gm *gm, int fd)
{
	uint64_t off = 0;

	if (ftruncate(fd, 0) < 0)
		return -errno;
	while (off < gm->total) {
		uint64_t run = off;

		while (run < gm->total && !mem_is_zero(gm->map + run, GM_PAGE_SIZE))
			run += GM_PAGE_SIZE;
		while (off < run) {
			ssize_t w = pwrite(fd, gm->map + off, run - off, (off_t)off);

			if (w < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			if (w == 0)
				return -ENOSPC;
			off += (uint64_t)w;
		}
		while (off < gm->total && mem_is_zero(gm->map + off, GM_PAGE_SIZE))
			off += GM_PAGE_SIZE; /* left as a hole */
	}
	/* Holes at the end still count toward the size. */
	if (ftruncate(fd, (off_t)gm->total) < 0)
		return -errno;
	return 0;
}

/* /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst): one
 * 64-bit entry per virtual page; bit 63 present, 62 swapped, 61 a file
 * page or shared anonymous. The flags are readable without privileges
 * (only the frame number is hidden). */
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_FILE (1ull << 61)

int gm_private_pages(const struct gm *gm, struct dirty *out)
{
	enum { BATCH = 4096 };
	uint64_t *e = NULL, pages = gm->total / GM_PAGE_SIZE, p = 0;
	int fd = -1, r;

	if (!gm->map || gm->fd < 0 || !gm->private_map)
		return -EINVAL;
	if ((r = dirty_init(out, pages)))
		return r;
	e = malloc(BATCH * sizeof(*e));
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (!e || fd < 0) {
		r = !e ? -ENOMEM : -errno;
		goto out;
	}
	while (p < pages) {
		uint64_t n = pages - p < BATCH ? pages - p : BATCH, i;
		off_t at = (off_t)(((uintptr_t)gm->map / GM_PAGE_SIZE + p) * sizeof(*e));
		ssize_t got = pread(fd, e, n * sizeof(*e), at);

		if (got < (ssize_t)sizeof(*e)) {
			r = got < 0 ? -errno : -EIO;
			goto out;
		}
		n = (uint64_t)got / sizeof(*e);
		for (i = 0; i < n; i++)
			if ((e[i] & (PM_PRESENT | PM_SWAPPED)) && !(e[i] & PM_FILE))
				dirty_mark(out, (p + i) * GM_PAGE_SIZE, GM_PAGE_SIZE);
		p += n;
	}
out:
	if (fd >= 0)
		close(fd);
	free(e);
	if (r)
		dirty_free(out);
	return r;
}
