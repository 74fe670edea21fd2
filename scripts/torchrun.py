#!/usr/bin/python3
"""torchrun, as Debian 12's python3-torch ships it (torch 1.13 on Python 3.11), with one fix.

torch 1.13's Std.from_str checks `Std(int(v)) in Std`; Python 3.11's flag enums leave the zero
member (Std.NONE) out of iteration, so the default --redirects / --tee of "0" parse to None and
torchrun fails before it starts a worker. This replaces that parser and runs torchrun's own main:

    scripts/torchrun.py --nproc_per_node 2 --no_python build/harness train --config my.yaml

(any torchrun arguments; a torch whose parser is sound runs unchanged).
"""
import re
import sys

from torch.distributed.elastic.multiprocessing.api import Std


def _from_str(cls, vm):
    if re.fullmatch(r"[0-3]", vm):
        return Std(int(vm))
    if re.fullmatch(r"(\d+:[0-3],)*\d+:[0-3]", vm):
        return {int(rank): Std(int(value)) for rank, value in (item.split(":") for item in vm.split(","))}
    raise ValueError(f"{vm} does not match: <std> or <local_rank>:<std>,... (std in 0-3)")


Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (after the patch)

if __name__ == "__main__":
    sys.exit(main())
