/* Firecracker's PUT /serial and PUT /cpu-config (docs/control-api.md):
 * where the guest's serial output goes, and a custom CPU template
 * (vmm/cputmpl.h) applied when the VM is built. Both before the start. */
#include "vmm/api/fcapi_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


int fcapi_put_serial(struct fcapi *a, const struct json *b, struct why *w)
{
	static const struct field f[] = { { "serial_out_path", F_STR, 0, NULL }, { "rate_limiter", F_OBJ, 0, NULL } };
	const struct json *rl = json_get(b, "rate_limiter");
	const char *path = NULL;
	char abs[PATH_MAX];
	int r;

	if ((r = fcapi_pre_boot(a, w)) || (r = fcapi_check_fields(b, f, 2, w)))
		return r;
	if (rl && rl->type != JSON_NULL) {
		snprintf(w->buf, w->len, "'rate_limiter' on the serial console is not supported by vmm "
			 "(its output is capped in size instead)");
		return -EINVAL;
	}
	if (json_get_str(b, "serial_out_path", &path) || !path) {
		a->cfg.has_serial = 0; /* as Firecracker: the VMM's standard output */
		return 0;
	}
	if ((r = fcapi_abs_path(abs, sizeof(abs), path, "serial_out_path", w)))
		return r;
	snprintf(a->cfg.serial_out, sizeof(a->cfg.serial_out), "%s", abs);
	a->cfg.has_serial = 1;
	return 0;
}

static int set_tmpl(struct fcapi *a, const struct json *v, struct why *w)
{
	char msg[384];
	struct cpu_tmpl *t = malloc(sizeof(*t));

	if (!t) {
		snprintf(w->buf, w->len, "out of memory");
		return -ENOMEM;
	}
	if (cpu_tmpl_parse(v, t, msg, sizeof(msg))) {
		snprintf(w->buf, w->len, FCAPI_DESER "%s", msg);
		free(t);
		return -EINVAL;
	}
	a->cfg.cpu_tmpl = *t;
	a->cfg.has_cpu_tmpl = 1;
	a->cfg.static_tmpl[0] = '\0'; /* one template at a time, as in Firecracker */
	a->cfg.touched = 1; /* a boot resource: /snapshot/load is refused after it */
	free(t);
	return 0;
}

int fcapi_put_cpu_config(struct fcapi *a, const struct json *b, struct why *w)
{
	int r;

	if ((r = fcapi_pre_boot(a, w)))
		return r;
	return set_tmpl(a, b, w);
}

/* The config file's "cpu-config": the template, or the path of a file
 * holding one (Firecracker takes both). */
int fcapi_cpu_config_file(struct fcapi *a, const struct json *v, struct why *w)
{
	char path[PATH_MAX], *text = NULL, *arena = NULL;
	const struct json *t;
	struct json_arena ar;
	const char *err = NULL;
	struct stat st;
	ssize_t got;
	int fd, r;

	if (v->type == JSON_OBJ)
		return set_tmpl(a, v, w);
	if (v->type != JSON_STR) {
		snprintf(w->buf, w->len, "'cpu-config' must be a CPU template or the path of one");
		return -EINVAL;
	}
	if ((r = fcapi_abs_path(path, sizeof(path), v->u.str.s, "cpu-config", w)))
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
		snprintf(w->buf, w->len, "cpu-config %.200s: %s", path,
			 fd < 0 ? strerror(errno) : "not a regular file of at most 1 MiB");
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	text = malloc((size_t)st.st_size + 1);
	arena = malloc(1u << 20);
	got = text && arena ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	r = -EINVAL;
	if (got < 0) {
		snprintf(w->buf, w->len, "cpu-config %.200s: cannot read it", path);
		goto out;
	}
	ar = (struct json_arena){ .buf = arena, .size = 1u << 20 };
	t = json_parse(text, (size_t)got, &ar, &err);
	if (!t)
		snprintf(w->buf, w->len, "cpu-config %.200s: %s", path, err ? err : "invalid JSON");
	else
		r = set_tmpl(a, t, w);
out:
	free(arena);
	free(text);
	return r;
}
