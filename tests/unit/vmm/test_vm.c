/* Whole VMs in one process: two at once (no hidden global state), KVM
 * open errors, exit reasons. Needs /dev/kvm and the test guests; skips with
 * a message where /dev/kvm is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/base/log.h"
#include "vmm/vm.h"
#include "tests/unit/vm_fixture.h"

static void config(struct run *r, const char *guest, unsigned cpus)
{
	memset(&r->cfg, 0, sizeof(r->cfg));
	snprintf(r->kernel, sizeof(r->kernel), "%s/%s", guest_dir(), guest);
	assert_int_equal(pipe2(r->out, O_NONBLOCK | O_CLOEXEC), 0);
	r->cfg.mem_bytes = 64ull << 20;
	r->cfg.cpus = cpus;
	r->cfg.kernel = r->kernel;
	r->cfg.cmdline = "";
	r->cfg.console_in = -1;
	r->cfg.console_out = r->out[1];
	r->cfg.t0_ns = log_now_ns();
}

static void two_vms_at_once(void **state)
{
	struct run *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	pthread_t ta, tb;
	char buf[256];
	ssize_t n;

	(void)state;
	if (!have_kvm()) {
		free(a);
		free(b);
		skip();
	}
	config(a, "hello.elf", 1);
	config(b, "triple.elf", 2);
	assert_int_equal(vm_create(&a->vm, &a->cfg), 0);
	assert_int_equal(vm_create(&b->vm, &b->cfg), 0);
	assert_int_equal(pthread_create(&ta, NULL, run_thread, a), 0);
	assert_int_equal(pthread_create(&tb, NULL, run_thread, b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	/* Each VM stopped for its own reason and wrote to its own console. */
	assert_int_equal(a->reason, VM_EXIT_REBOOT);
	assert_int_equal(b->reason, VM_EXIT_TRIPLE_FAULT);
	assert_true(atomic_load(&a->vm.marker_ns) > 0);
	assert_int_equal(atomic_load(&b->vm.marker_ns), 0);
	n = read(a->out[0], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = 0;
	assert_non_null(strstr(buf, "hello from the test guest"));
	n = read(b->out[0], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = 0;
	assert_non_null(strstr(buf, "about to triple fault"));
	assert_null(strstr(buf, "hello"));
	vm_destroy(&a->vm);
	vm_destroy(&b->vm);
	close(a->out[0]);
	close(a->out[1]);
	close(b->out[0]);
	close(b->out[1]);
	free(a);
	free(b);
}

static void create_errors_leave_nothing(void **state)
{
	struct run *r = calloc(1, sizeof(*r));
	int before, after;

	(void)state;
	if (!have_kvm()) {
		free(r);
		skip();
	}
	config(r, "hello.elf", 1);
	before = dup(0);
	close(before);
	r->cfg.kvm_path = "/nonexistent/kvm";
	assert_int_equal(vm_create(&r->vm, &r->cfg), -ENOENT);
	r->cfg.kvm_path = "/dev/null"; /* not KVM: the API version check fails */
	assert_true(vm_create(&r->vm, &r->cfg) < 0);
	r->cfg.kvm_path = NULL;
	r->cfg.kernel = "/nonexistent/vmlinux";
	assert_int_equal(vm_create(&r->vm, &r->cfg), -ENOENT);
	r->cfg.kernel = "/etc/hostname"; /* not a kernel */
	assert_int_equal(vm_create(&r->vm, &r->cfg), -ENOEXEC);
	r->cfg.kernel = r->kernel;
	r->cfg.cpus = 0;
	assert_int_equal(vm_create(&r->vm, &r->cfg), -EINVAL);
	r->cfg.cpus = 1;
	r->cfg.mem_bytes = 1 << 20;
	assert_int_equal(vm_create(&r->vm, &r->cfg), -EINVAL);
	/* No descriptor leaked by any failed attempt. */
	after = dup(0);
	close(after);
	assert_int_equal(before, after);
	close(r->out[0]);
	close(r->out[1]);
	free(r);
}

static void exit_statuses_are_distinct(void **state)
{
	int seen[256] = { 0 };
	int r;

	(void)state;
	for (r = VM_EXIT_POWEROFF; r <= VM_EXIT_CONSOLE; r++) {
		int s = vm_exit_status((enum vm_exit_reason)r, 15);

		assert_true(s >= 0 && s < 256);
		assert_int_equal(seen[s], 0);
		seen[s] = 1;
		assert_string_not_equal(vm_exit_reason_name((enum vm_exit_reason)r), "unknown");
	}
	assert_int_equal(vm_exit_status(VM_EXIT_POWEROFF, 0), 0);
	assert_int_equal(vm_exit_status(VM_EXIT_SIGNAL, 15), 143);
}

/* The vmm port's token window (no KVM needed): byte i of the API token at
 * port VMM_TOKEN_BASE + i, NUL-padded, any access width; writes change
 * nothing; no token, all NULs; a token is cut to fit its NUL. */
static void token_window(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct bus pio;
	char win[VMM_TOKEN_LEN + 4], big[200];
	uint32_t w;
	unsigned i;

	(void)state;
	assert_non_null(vm);
	vm->cfg.api_token = "tok-3f9a";
	vmm_port_init(&vm->dev.port, NULL, vm->cfg.api_token);
	memset(&pio, 0, sizeof(pio));
	assert_int_equal(bus_add(&pio, &vm->dev.port.bus), 0);
	assert_int_equal(bus_add(&pio, &vm->dev.port.token_bus), 0);
	memset(win, 0x55, sizeof(win));
	for (i = 0; i < VMM_TOKEN_LEN; i++)
		assert_int_equal(bus_access(&pio, VMM_TOKEN_BASE + i, win + i, 1, 0), 0);
	assert_string_equal(win, "tok-3f9a");
	for (i = 8; i < VMM_TOKEN_LEN; i++)
		assert_int_equal(win[i], 0);
	assert_int_equal(bus_access(&pio, VMM_TOKEN_BASE + 4, &w, 4, 0), 0);
	assert_memory_equal(&w, "3f9a", 4);
	w = 0x41414141;
	bus_access(&pio, VMM_TOKEN_BASE, &w, 4, 1);
	assert_int_equal(bus_access(&pio, VMM_TOKEN_BASE, &w, 4, 0), 0);
	assert_memory_equal(&w, "tok-", 4);
	/* The window ends where it says: the last dword is inside, the next
	 * port is not (reads as all ones). */
	assert_int_equal(bus_access(&pio, VMM_TOKEN_BASE + VMM_TOKEN_LEN - 4, &w, 4, 0), 0);
	assert_int_equal(w, 0);
	assert_int_equal(bus_access(&pio, VMM_TOKEN_BASE + VMM_TOKEN_LEN, &w, 1, 0), -ENOENT);

	vm->cfg.api_token = NULL;
	vmm_port_init(&vm->dev.port, NULL, vm->cfg.api_token);
	memset(win, 0x55, sizeof(win));
	for (i = 0; i < VMM_TOKEN_LEN; i++)
		bus_access(&pio, VMM_TOKEN_BASE + i, win + i, 1, 0);
	for (i = 0; i < VMM_TOKEN_LEN; i++)
		assert_int_equal(win[i], 0);

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	vm->cfg.api_token = big;
	vmm_port_init(&vm->dev.port, NULL, vm->cfg.api_token);
	for (i = 0; i < VMM_TOKEN_LEN; i++)
		bus_access(&pio, VMM_TOKEN_BASE + i, win + i, 1, 0);
	assert_int_equal(win[VMM_TOKEN_LEN - 1], 0);
	assert_int_equal(strlen(win), VMM_TOKEN_LEN - 1);
	free(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exit_statuses_are_distinct),
		cmocka_unit_test(token_window),
		cmocka_unit_test(two_vms_at_once),
		cmocka_unit_test(create_errors_leave_nothing),
	};

	if (!have_kvm())
		fprintf(stderr, "test_vm: %s is not usable here: the VM tests are skipped\n",
			KVM_DEVICE_PATH);
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests_name("vm", tests, NULL, NULL);
}
