"""Deployable stacks."""

from infra.stacks.auto_stop_stack import AutoStopStack

__all__ = ["AutoStopStack"]
