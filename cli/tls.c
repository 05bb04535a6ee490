/* vmm-tls: the whole CLI, TLS libraries linked (cli/cli.h, docs/perf.md
 * "Two binaries"). */
#include "cli.h"

const int cli_lean = 0;
