"""TreeDepth (XGBoost): trees deeper than ``depth``.

docs/RULES.md#treedepth. The XGBoost hook saves the node ids of the round's trees as ``trees/Node``; the
depth is ``floor(log2(max node id))`` (0 for a lone root), as the AWS docs define it. That formula
counts a full tree right but an unbalanced one short (a path of depth 5 can end at node id 10):
sdk_ext's hook also saves each node's depth as ``trees/Depth``, and when a step has it, the rule
takes the largest one. Fires when the depth exceeds ``depth``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import BuiltinRule, is_numeric


def depth_from_node_ids(node_ids: np.ndarray) -> int:
    """``floor(log2(max id))``; 0 when the largest id is 0 (a single node) or there are none."""
    ids = np.asarray(node_ids)
    if ids.size == 0:
        return 0
    top = int(np.max(ids))
    return top.bit_length() - 1 if top >= 1 else 0  # floor(log2(top)), exactly


class TreeDepth(BuiltinRule):
    """Fires when the deepest tree (from ``trees/Node``) is deeper than ``depth``."""

    def __init__(self, base_trial: Any, depth: int | str = 4, *, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.depth = self.params.integer("depth", depth, ge=0)
        self.params.done()

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, regex=[r"(^|/)trees/Node$"], all_if_empty=False):
            depths = self.value(name[: -len("Node")] + "Depth", step)
            if depths is not None and is_numeric(depths):
                d = int(np.max(depths))
                if d > self.depth:
                    return self.found_issue(f"tensor {name[:-4] + 'Depth'!r}: a tree of depth {d}, deeper than "
                                            f"depth {self.depth}")
                continue
            ids = self.value(name, step)
            if ids is None or not is_numeric(ids):
                continue
            d = depth_from_node_ids(ids)
            if d > self.depth:
                return self.found_issue(
                    f"tensor {name!r}: largest node id {int(np.max(ids))} means depth {d}, deeper than depth "
                    f"{self.depth}"
                )
        return False
