"""Conflux as a torch.distributed backend.

``import conflux_torch`` registers the backend ``"conflux"`` for CPU and CUDA tensors; after
``pip install`` the registration also happens by itself (torch's backend entry points), so
``torch.distributed.init_process_group("conflux")`` works without the import. See docs/pytorch.md.
"""

import os

import torch
import torch.distributed as dist

# libconflux loads libfabric, whose PSM provider (libinfinipath) otherwise installs handlers for SIGTERM,
# SIGSEGV, SIGABRT, SIGBUS and SIGILL when it loads: they write "*.btr" files and exit from inside the
# handler, which crashes Python when a launcher ends a rank with SIGTERM. This keeps them out.
os.environ.setdefault("IPATH_NO_BACKTRACE", "1")

__all__ = ["BACKEND_NAME", "register", "library_version"]

BACKEND_NAME = "conflux"


def _create_backend(dist_opts, pg_opts):
    """torch's extended-API creator: called on the members of every new process group."""
    from . import _C  # the extension (and libconflux) load only when a group is made

    ranks = [int(r) for r in dist_opts.global_ranks_in_group]
    parent = dist_opts.split_from
    if parent is not None and isinstance(parent, _C.ProcessGroupConflux) and ranks:
        # new_group with a bound device: split the default group (its ranks are the global ranks);
        # the ranks outside the new group take part through perform_nocolor_split.
        opts = parent.options
        opts.group_name = dist_opts.group_id
        opts._timeout = dist_opts.timeout
        return parent.split(dist_opts.store, ranks, opts)
    return _C.ProcessGroupConflux(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        dist_opts.timeout,
        str(dist_opts.group_id),
        ranks,
    )


def register():
    """Registers (again, harmlessly) the ``"conflux"`` backend with torch.distributed."""
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"])


def _autoload():
    """Entry point of torch's backend auto-loading (``torch.backends`` and ``torch.distributed.backends``).

    Only registers the name: the extension loads when a conflux process group is first made.
    """
    register()


def library_version():
    """The version code of the Conflux library in use (major * 10000 + minor * 100 + patch)."""
    from . import _C

    return _C.library_version()


register()
