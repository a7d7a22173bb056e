"""Imported by the local executor's fork server (`SharedCoresExecutor`): numba and the text kernel are loaded
once there, so each task process forked from the server starts with them instead of paying ~0.6-0.9 s on its
first kernel call. Every local step with more than one worker starts its tasks from that server, so a stage
pays the load once instead of once per task process per step.

Importing this module never raises: a fork server whose preload fails with anything but ImportError exits, and
every task of the step with it."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def warm() -> None:
    """`kernel.warm_up()` where numba is installed; nothing otherwise."""
    try:
        from cotforge.curate.text.columns import kernel_installed

        if kernel_installed():
            from cotforge.curate.text import kernel

            kernel.warm_up()
    except Exception as e:  # noqa: BLE001 - a task loads the kernel itself on its first call
        log.debug("kernel warm-up in the fork server failed: %s", e)


warm()
