/* The VM object: owns KVM handles, guest memory, vCPUs and devices. No
 * mutable globals anywhere: two VMs can live in one process (tests do). */
#ifndef VMM_VM_H
#define VMM_VM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/idle.h"
#include "vmm/base/bus.h"
#include "vmm/cpuid.h"
#include "vmm/cputmpl.h"
#include "vmm/base/gm.h"
#include "vmm/base/kvm.h"
#include "vmm/notice.h"
#include "vmm/phase.h"
#include "vmm/base/tty.h"
#include "vmm/base/uffd.h"

struct pollfd;
struct snapshot;
struct vm;

/* A poll source vm_run serves beside its own fds (vm_add_poll_source): the
 * launcher's control socket. pollfds fills at most `max` entries of p[]
 * and may lower *timeout_ms (-1: none); events serves what poll reported
 * for them. Both run on the main thread, between the VM's other events. */
struct vm_poll_source {
	unsigned max;
	unsigned (*pollfds)(void *arg, struct pollfd *p, int *timeout_ms);
	void (*events)(void *arg, struct vm *vm, const struct pollfd *p, unsigned n);
	void *arg;
};
#define VM_MAX_POLL_SOURCES 2
#define VM_POLL_SOURCE_FDS 32 /* all sources' max together */
#include "devices/devices.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_net.h"
#include "devices/virtio_fs.h"
#include "devices/virtio_vsock.h"
#include "devices/virtio_rng.h"
#include "devices/virtio_balloon.h"

#define VM_MAX_VCPUS 64
#define VM_DEFAULT_MEM_MIB 512
#define VM_MIN_MEM_MIB 32
/* virtio-mmio devices: one 4 KiB window and one IOAPIC pin (5..23) each. */
#define VM_MAX_VIRTIO 19
#define VM_MAX_DISKS 16
#define VM_MAX_NETS 8
#define VM_MAX_FS 8

/* Why a VM stopped; each maps to a documented exit status (docs/exit-status.md). */
enum vm_exit_reason {
	VM_RUNNING = 0,
	VM_EXIT_POWEROFF,    /* guest asked to power off (vmm port) */
	VM_EXIT_REBOOT,      /* guest reset: i8042 reset line, KVM reset event */
	VM_EXIT_TRIPLE_FAULT,/* KVM_EXIT_SHUTDOWN */
	VM_EXIT_KVM_ERROR,   /* internal error, failed entry, unknown exit */
	VM_EXIT_CRASH,       /* KVM_SYSTEM_EVENT_CRASH */
	VM_EXIT_VMM_ERROR,   /* host-side failure while running */
	VM_EXIT_SIGNAL,      /* the VMM was told to stop (SIGTERM, SIGINT, ...) */
	VM_EXIT_CONSOLE,     /* the user typed the console escape (Ctrl-A x) */
	VM_EXIT_STOPPED,     /* stopped through the control socket */
	VM_EXIT_EXPIRED,     /* its time to live (--ttl) ran out */
	VM_EXIT_STANDBY,     /* suspended in place (vmm/vm_standby.h) */
};

/* Process exit status for each reason (documented in docs/exit-status.md). */
int vm_exit_status(enum vm_exit_reason r, int signo);
const char *vm_exit_reason_name(enum vm_exit_reason r);

struct vm_config {
	uint64_t mem_bytes;
	unsigned cpus;
	const char *kernel;
	const char *initrd;      /* NULL: none */
	const char *cmdline;     /* the user's part; the VMM appends to it */
	enum cpu_template tmpl;
	int tmpl_explicit;       /* --cpu-template given */
	int host_emulates_ring0; /* detected (or forced for tests) */
	int console_in;          /* fd the UART reads from, -1 for none */
	int console_out;         /* fd the UART writes to, -1 for none */
	int console_escape;      /* Ctrl-A x quits (interactive terminal) */
	const char *console_path;/* console_out is this regular file: capped at */
	uint64_t console_limit;  /* this many bytes, then renamed PATH.1 (0: never) */
	int console_tty;         /* console_in is a terminal: vm_run reads it and
				    keeps it in raw mode only while the VMM is its
				    foreground process group (vmm/base/tty.h) */
	pid_t sigint_helper;     /* >0: while this child lives, a terminal's SIGINT
				    (Ctrl-C: si_code SI_KERNEL) is its to act on:
				    it forwards it to the command in the guest, or
				    sends the VMM VM_INTERRUPT_SIGNAL to stop; a
				    SIGINT sent by a process stops the VM as always
				    (cli/run.c start_helper) */
	const char *kvm_path;
	const char *kvm_cache;   /* KVM's supported CPUID and MSR list, cached per
				    host (vmm/kvmcache.h); NULL: asked every time */
	unsigned nr_disks;
	struct blk_options disks[VM_MAX_DISKS]; /* owned by the caller */
	unsigned nr_fs;
	struct fs_options fs[VM_MAX_FS];        /* owned by the caller */
	int has_vsock;
	struct vsock_options vsock;
	unsigned nr_nets;
	struct net_options nets[VM_MAX_NETS];
	struct mmds *mmds;       /* the MMDS the interfaces with .mmds serve (the
				    caller's: it outlives the VM) */
	int has_entropy;         /* a virtio-rng device (PUT /entropy, --entropy) */
	struct rng_options entropy;
	int has_balloon;         /* a virtio-balloon device (PUT /balloon, --balloon) */
	struct balloon_options balloon;
	const struct cpu_tmpl *cpu_tmpl; /* PUT /cpu-config (vmm/cputmpl.h), or NULL;
				    the caller's, read while vCPUs are set up */
	struct tap *pre_taps;    /* non-NULL: nr_nets TAPs already open (the
				    jailer's); vm_create takes each over (fd -1) */
	pid_t host_pid;          /* the VMM's pid on the host, 0: getpid() (a
				    jailed VMM is pid 1 in its namespace) */
	uint64_t t0_ns;          /* VMM start, for the boot-time figures */
	uint64_t pre_main_ns;    /* CPU time before t0 (phase_cpu_ns()) */
	const char *api_token;   /* the guest API's token: served to guest root by
				    the vmm port's token window (never on the
				    command line), recorded in snapshots */
	struct snapshot *restore;/* non-NULL: build the VM from this snapshot */
	struct uffd_backend *uffd;/* with restore, non-NULL: guest memory already
				    mapped and handed to a page-fault handler
				    (PUT /snapshot/load's Uffd backend, vmm/base/uffd.h);
				    vm_create takes it over at its memory step
				    (left empty); the caller closes what is left */
	uint64_t expire_ns;      /* log_now_ns() deadline (--ttl), 0: none */
	int start_paused;        /* vm_run parks the vCPUs at once (vm_resume) */
	int ready_notice;        /* with a vsock uds: take guest-init's ready
				    notice (vmm/notice.h) as the boot marker */
	int seccomp;             /* each thread under its allow-list (vmm/seccomp.h);
				    the CLI sets it unless --no-seccomp */
	int track_dirty;         /* dirty-page tracking for diff snapshots and
				    in-place updates (docs/snapshot.md); off: no
				    KVM dirty log, no bitmap, no cost */
	const char *standby_dir; /* the sandbox's folder: it can go on standby
				    there (vmm/vm_standby.h); NULL: it cannot */
	uint64_t idle_timeout_ns;/* auto-standby after this long idle (vmm/idle.h); 0: never */
};

struct vcpu {
	struct vm *vm;
	unsigned index;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	int started;
	unsigned cpuid_nent;     /* entries in the CPUID table set (KVM_SET_CPUID2) */
};

struct vm {
	struct vm_config cfg;
	struct kvm_sys kvm;
	int fd;
	struct gm gm;
	struct uffd_conn uffd;   /* cfg.uffd's userfaultfd and handler connection,
				    held for the VM's life; -1s without */
	unsigned nr_vcpus;
	struct vcpu vcpus[VM_MAX_VCPUS];
	struct gprof *prof;      /* VMM_GUEST_PROFILE's samples (vmm/gprof.h); NULL without */
	struct bus pio;
	struct bus mmio;
	struct devices dev;
	unsigned nr_virtio;      /* virtio-mmio slots handed out */
	struct virtio_blk *disks[VM_MAX_DISKS];
	struct vsock_dev *vsock;
	struct virtio_net *nets[VM_MAX_NETS];
	struct virtio_fs *fs[VM_MAX_FS];
	struct virtio_rng *rng;  /* cfg.has_entropy */
	struct virtio_balloon *balloon; /* cfg.has_balloon */
	char cmdline[4096];      /* the full command line given to the guest */
	struct virtio_dev *virtio[VM_MAX_VIRTIO]; /* every virtio device, by slot */

	/* Pause: vCPUs park at a clean point (pending MMIO/PIO completed),
	 * device loops park between requests. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	_Atomic int pause_req;
	unsigned parked;         /* vCPU threads parked or gone */
	int paused;              /* vm_pause() succeeded, not resumed yet */
	/* The guest's clocks as vm_pause() stopped it: a snapshot saves these,
	 * not what KVM reads later (the memory write takes its time, and the
	 * guest must not see it as a jump: restores resume from the pause). */
	struct {
		int valid;
		uint64_t kvmclock;             /* KVM_GET_CLOCK */
		uint64_t tsc[VM_MAX_VCPUS];    /* each vCPU's IA32_TSC */
	} frozen;
	struct vm_poll_source sources[VM_MAX_POLL_SOURCES]; /* served by vm_run */
	unsigned nr_sources;
	struct tty tty;          /* cfg.console_tty: the terminal, main thread */

	int cpuid_overridden;    /* KVM does not apply the CPUID we set */
	int tsc_said;            /* a restore found KVM kept its own TSC (said once) */
	char start_why[256];     /* why vm_create failed, for a client (the Firecracker
				    API's InstanceStart), "" if no more than the log */

	_Atomic int exit_reason;
	int exit_signo;
	int exit_sender;          /* the pid that sent that stop signal (0: the kernel) */
	char exit_msg[256];
	int exit_efd;            /* written once when exit_reason is set */

	/* Dirty tracking (cfg.track_dirty): the bitmap is vm->gm.dirty. */
	int dirty_manual;        /* KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2 enabled */
	char snap_dir[4096];     /* the snapshot the bitmap counts from (the last
				    one written or restored), "" if none */
	uint8_t snap_id[16];     /* its ID (vmm/base/snapfmt_diff.h) */
	/* A restore from a snapshot's memory file (not uffd): the full
	 * snapshot whose file guest RAM maps MAP_PRIVATE (a diff's chain
	 * bottom), for the whole run. Pages that differ from it are the
	 * mapping's private ones (gm_private_pages): a diff on it needs no
	 * tracking. "" otherwise. */
	char mem_base_dir[4096];
	uint8_t mem_base_id[16];

	_Atomic uint64_t first_run_ns; /* first KVM_RUN, since cfg.t0_ns */
	_Atomic uint64_t marker_ns;    /* boot marker, since cfg.t0_ns */
	_Atomic int kernel_up;         /* the guest's init read the token window */
	int marker_fd;                 /* -1, or gets 'K' when the guest's init
					  starts (kernel up) and 'R' at the boot
					  marker or ready notice (ready) */
	struct phases phases;          /* start-up phases (vmm/phase.h), from cfg.t0_ns */
	struct notice notice;          /* cfg.ready_notice: main thread */
	struct idle idle;              /* cfg.idle_timeout_ns: main thread */
};

/* "Stop as if interrupted" (exit status 130), from the helper child that
 * took the terminal's Ctrl-C (cfg.sigint_helper). Not SIGINT: the terminal
 * sent the VMM its own SIGINT at the same moment, and a standard signal
 * sent while one of its number is pending is dropped (signal(7)), so the
 * helper's SIGINT could vanish into the one vm_run leaves to the helper.
 * A real-time signal is queued on its own. A constant (glibc's SIGRTMIN is
 * a call) for the seccomp rules; clear of glibc's two and VCPU_KICK_SIGNAL.
 * Blocked, like the stop signals, before the VMM starts any thread. */
#define VM_INTERRUPT_SIGNAL (__SIGRTMIN + 6)

/* Builds the whole VM (KVM, memory, kernel, tables, vCPUs, devices).
 * 0 or -errno, with one line logged saying what failed; on failure nothing
 * is left open. */
int vm_create(struct vm *vm, const struct vm_config *cfg)
	__attribute__((warn_unused_result));
/* The two builders vm_create chooses between (vm_create.c): a fresh boot
 * (cfg->restore NULL), and a restore of cfg->restore (with cfg->uffd, its
 * memory served by a page-fault handler). The same contract as vm_create. */
int vm_create_for_boot(struct vm *vm, const struct vm_config *cfg) __attribute__((warn_unused_result));
int vm_create_from_snapshot(struct vm *vm, const struct vm_config *cfg) __attribute__((warn_unused_result));
/* Runs until the guest or the host stops it; returns the reason.
 * SIGTERM, SIGHUP, SIGQUIT and SIGINT stop it (see cfg.sigint_helper).
 * They stay blocked when it returns, with any already pending discarded:
 * a second Ctrl-C or a supervisor's repeated SIGTERM must not cut short the
 * caller's teardown (sockets, TAP devices, snapshot files); a stop signal
 * that arrives after that stops the next vm_run at once. */
enum vm_exit_reason vm_run(struct vm *vm);
void vm_destroy(struct vm *vm);
/* Has vm_run serve src too (copied), from its next poll. Before vm_run.
 * 0, or -ENOSPC past VM_MAX_POLL_SOURCES or VM_POLL_SOURCE_FDS. */
int vm_add_poll_source(struct vm *vm, const struct vm_poll_source *src)
	__attribute__((warn_unused_result));

/* Stops every vCPU at a clean point (an MMIO/PIO exit is completed first)
 * and parks every device loop between requests. Main thread, while vm_run
 * runs. 0, or -ESHUTDOWN if the VM is stopping. Idempotent. */
int vm_pause(struct vm *vm);
void vm_resume(struct vm *vm);

/* Asks the guest to shut down cleanly (Firecracker's SendCtrlAltDel): a
 * thread connects to the guest's API over vsock with the sandbox's token
 * and sends the shutdown request; guest-init stops every process, syncs
 * and powers off (status 0). Returns at once: 0, or -ENOTSUP without a
 * vsock device. */
int vm_guest_shutdown(struct vm *vm);
/* Firecracker's SendCtrlAltDel: Ctrl-Alt-Del typed on the i8042 keyboard
 * (IRQ 1) if the guest's i8042 driver set the controller up, as Firecracker
 * does; otherwise vm_guest_shutdown. 0 or -ENOTSUP (neither way). */
int vm_ctrl_alt_del(struct vm *vm);

/* Called by devices and vCPU threads. The first reason wins. */
void vm_request_exit(struct vm *vm, enum vm_exit_reason r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sets an IOAPIC/PIC input line. */
void vm_irq_line(struct vm *vm, unsigned gsi, int level);
/* The guest wrote the boot marker, or sent its ready notice: marks
 * PHASE_READY and writes marker_fd, once. */
void vm_boot_marker(struct vm *vm);
/* Before a snapshot of a running VM (main thread): waits, at most
 * timeout_ms, while guest-init says a spare API worker is on its way
 * (vmm/notice.h), so the snapshot holds one and every clone's first
 * request is served without a fork. The ms waited; a guest that never
 * settles costs the bound and a log line, nothing else. */
unsigned vm_settle_guest(struct vm *vm, int timeout_ms);
/* Before a snapshot of a running VM (main thread): waits, at most
 * timeout_ms, until the guest's free page reporting has handed over
 * what it is about to (virtio_balloon_report_wait_ns): a young VM's
 * first pass, else any pass under way. Otherwise every clone makes that
 * pass again and pays for the pages it writes. The ms waited. */
unsigned vm_settle_reports(struct vm *vm, int timeout_ms);
/* The guest's init read the token window, its first act: the kernel is up
 * (for the boot status line, cli/run.c). Once; later reads are nothing. */
void vm_kernel_up(struct vm *vm);
/* Writes vCPU `index`'s CPUID table, one "function index eax ebx ecx edx"
 * line (hex) per entry. */
int vm_dump_cpuid(struct vm *vm, unsigned index, const char *path);

/* Host detection: does this host's KVM emulate guest ring 0 (kvm_pvm)? */
int host_emulates_ring0(void);

#endif
