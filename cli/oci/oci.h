/* The oci subsystem's public header: what the verbs and the
 * other subsystems may use of cli/oci/ (docs/ARCHITECTURE.md). */
#ifndef CLI_OCI_OCI_H
#define CLI_OCI_OCI_H

/* The rest of the subsystem's interface. */
#include "cli/oci/oci_cgroup.h"
#include "cli/oci/oci_events.h"
#include "cli/oci/oci_hooks.h"
#include "cli/oci/oci_net.h"
#include "cli/oci/oci_pod.h"
#include "cli/oci/oci_rootfs.h"
#include "cli/oci/oci_proxy.h"
#include "cli/oci/oci_shim.h"
#include "cli/oci/oci_spec.h"
#include "cli/oci/oci_state.h"
#include "cli/oci/oci_stats.h"
#include "cli/oci/oci_vm.h"

#endif
