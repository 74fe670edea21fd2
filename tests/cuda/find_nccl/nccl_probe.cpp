// Compiled by the find_nccl CTest only: which nccl.h the torch target's include folders reach.
#include <nccl.h>

int nccl_probe_version = NCCL_VERSION_CODE;
