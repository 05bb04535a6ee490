/* The dockerfile subsystem's public header: what the verbs and the
 * other subsystems may use of cli/dockerfile/ (docs/ARCHITECTURE.md). */
#ifndef CLI_DOCKERFILE_DOCKERFILE_H
#define CLI_DOCKERFILE_DOCKERFILE_H

#endif
