"""DebuggerHookConfig and TensorBoardOutputConfig: where the training hook writes.

Request forms::

    "DebugHookConfig": {"S3OutputPath": "s3://b/p", "LocalPath": "/opt/ml/output/tensors",
                        "HookParameters": {"save_interval": "100"},
                        "CollectionConfigurations": [{"CollectionName": "weights"}]}
    "TensorBoardOutputConfig": {"S3OutputPath": "s3://b/tb", "LocalPath": "/opt/ml/output/tensorboard"}

``S3OutputPath`` is always present in ``_to_request_dict()`` (``None`` until apply_debugger fills it
from the job's output path); the other keys only when their value is not None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sdk_ext.debugger.collection import CollectionConfig
from sdk_ext.debugger.errors import Problems, check_optional_str, check_s3_uri, check_str_mapping


def check_collections(problems: Problems, what: str, value: object) -> list[CollectionConfig] | None:
    """Check ``value`` is an iterable of CollectionConfig; return it as a new list."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        problems.add(f"{what} must be a list of CollectionConfig, got {type(value).__name__} {value!r}")
        return None
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, CollectionConfig):
            problems.add(
                f"{what}[{i}] must be a CollectionConfig, got {type(item).__name__} {item!r}; "
                "write CollectionConfig(name=..., parameters={...})"
            )
    return items


class DebuggerHookConfig:
    """Configuration of the tensor-saving hook inside the training container.

    Args:
        s3_output_path: Where the tensors go; apply_debugger uses the job's
            ``OutputDataConfig.S3OutputPath`` when unset.
        container_local_output_path: The directory inside the container the hook writes first.
        hook_parameters: Hook-wide settings (``save_interval``, ``include_workers``, ...).
        collection_configs: The collections to save.

    Raises:
        DebuggerConfigError: listing every invalid argument.
    """

    def __init__(
        self,
        s3_output_path: str | None = None,
        container_local_output_path: str | None = None,
        hook_parameters: Mapping[str, Any] | None = None,
        collection_configs: Iterable[CollectionConfig] | None = None,
    ) -> None:
        problems = Problems("DebuggerHookConfig")
        check_s3_uri(problems, "s3_output_path", s3_output_path)
        check_optional_str(problems, "container_local_output_path", container_local_output_path)
        params = check_str_mapping(problems, "hook_parameters", hook_parameters, string_values=False)
        collections = check_collections(problems, "collection_configs", collection_configs)
        problems.raise_if_any()
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path
        self.hook_parameters = params
        self.collection_configs = collections

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        if self.hook_parameters is not None:
            request["HookParameters"] = dict(self.hook_parameters)
        if self.collection_configs is not None:
            request["CollectionConfigurations"] = [c._to_request_dict() for c in self.collection_configs]
        return request

    @classmethod
    def from_request_dict(cls, data: Mapping[str, Any]) -> DebuggerHookConfig:
        """The config a request's ``DebugHookConfig`` describes (the reverse of ``_to_request_dict``)."""
        collections = data.get("CollectionConfigurations")
        return cls(
            s3_output_path=data.get("S3OutputPath"),
            container_local_output_path=data.get("LocalPath"),
            hook_parameters=data.get("HookParameters"),
            collection_configs=(None if collections is None
                                else [CollectionConfig.from_request_dict(c) for c in collections]),
        )

    def __repr__(self) -> str:
        return (
            f"DebuggerHookConfig(s3_output_path={self.s3_output_path!r}, "
            f"container_local_output_path={self.container_local_output_path!r}, "
            f"hook_parameters={self.hook_parameters!r}, collection_configs={self.collection_configs!r})"
        )


class TensorBoardOutputConfig:
    """Where TensorBoard event files written in the container are uploaded.

    Args:
        s3_output_path: The S3 destination (required).
        container_local_output_path: The directory inside the container to upload from.

    Raises:
        DebuggerConfigError: listing every invalid argument.
    """

    def __init__(self, s3_output_path: str, container_local_output_path: str | None = None) -> None:
        problems = Problems("TensorBoardOutputConfig")
        check_s3_uri(problems, "s3_output_path", s3_output_path, optional=False)
        check_optional_str(problems, "container_local_output_path", container_local_output_path)
        problems.raise_if_any()
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        return request

    def __repr__(self) -> str:
        return (
            f"TensorBoardOutputConfig(s3_output_path={self.s3_output_path!r}, "
            f"container_local_output_path={self.container_local_output_path!r})"
        )
