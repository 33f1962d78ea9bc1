"""Reusable constructs."""

from infra.constructs.auto_stop import LAMBDA_DIR, AutoStop

__all__ = ["LAMBDA_DIR", "AutoStop"]
