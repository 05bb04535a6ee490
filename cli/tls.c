/* vmm-tls: the whole CLI, TLS libraries linked (cli/util/util.h, docs/perf.md
 * "Two binaries"). */
#include "cli/util/util.h"

const int cli_lean = 0;
