/* SPDX-License-Identifier: MIT */
#pragma once

/* The verbs of the `tend` command line. Each returns the process exit code
 * (0 success, 1 failure, 2 usage error) and prints its own messages. */

int cli_validate(int argc, char **argv);
